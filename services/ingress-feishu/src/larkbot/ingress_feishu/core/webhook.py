"""Webhook mode: verify and open a Feishu event callback (pure; the HTTP handler is in adapters).

Feishu's rules (event subscription documentation), applied in this order:

1. An encrypted body is ``{"encrypt": base64(iv ‖ AES-256-CBC(key=SHA-256(encrypt_key), PKCS#7))}``.
2. With an encrypt key configured, every callback except the URL-verification challenge carries
   ``X-Lark-Request-Timestamp``, ``X-Lark-Request-Nonce`` and ``X-Lark-Signature`` =
   ``sha256_hex(timestamp + nonce + encrypt_key + raw_body)``; a missing or wrong signature is a forgery.
3. With a verification token configured, the token (``header.token`` in schema 2.0, ``token`` in the
   challenge) must match.
4. ``{"type": "url_verification", "challenge": …}`` is answered with ``{"challenge": …}``.

Comparisons are constant-time. Rejections name the failed rule, never a secret or the payload.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from Crypto.Cipher import AES

SIGNATURE_HEADERS = ("X-Lark-Request-Timestamp", "X-Lark-Request-Nonce", "X-Lark-Signature")


@dataclass(frozen=True, slots=True)
class Challenge:
    challenge: str


@dataclass(frozen=True, slots=True)
class Accepted:
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Rejected:
    #: ``bad_signature`` | ``bad_token`` | ``undecryptable`` | ``not_json``
    reason: str
    detail: str


Verdict = Challenge | Accepted | Rejected


def signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def encrypt(plaintext: bytes, encrypt_key: str, iv: bytes) -> str:
    """Feishu's encryption (used by the fake Feishu and by tests)."""
    key = hashlib.sha256(encrypt_key.encode()).digest()
    pad = 16 - len(plaintext) % 16
    sealed = AES.new(key, AES.MODE_CBC, iv).encrypt(plaintext + bytes([pad]) * pad)
    return base64.b64encode(iv + sealed).decode()


def decrypt(encrypted: str, encrypt_key: str) -> bytes:
    key = hashlib.sha256(encrypt_key.encode()).digest()
    raw = base64.b64decode(encrypted, validate=True)
    if len(raw) < 32 or len(raw) % 16:
        raise ValueError("ciphertext has the wrong length")
    plain = AES.new(key, AES.MODE_CBC, raw[:16]).decrypt(raw[16:])
    pad = plain[-1]
    if not 1 <= pad <= 16 or plain[-pad:] != bytes([pad]) * pad:
        raise ValueError("bad padding")
    return plain[:-pad]


def verify(
    body: bytes,
    headers: Mapping[str, str],
    *,
    encrypt_key: str | None,
    verification_token: str | None,
) -> Verdict:
    """Decide what a webhook request is. ``headers`` lookups must be case-insensitive (aiohttp's are)."""
    try:
        outer = json.loads(body)
    except ValueError:
        return Rejected("not_json", "the body is not JSON")
    if not isinstance(outer, dict):
        return Rejected("not_json", "the body is not a JSON object")
    data: Any = outer
    if isinstance(outer.get("encrypt"), str):
        if not encrypt_key:
            return Rejected("undecryptable", "an encrypted callback arrived but no encrypt key is configured")
        try:
            data = json.loads(decrypt(outer["encrypt"], encrypt_key))
        except ValueError:
            return Rejected("undecryptable", "the encrypted body does not decrypt with the configured key")
        if not isinstance(data, dict):
            return Rejected("not_json", "the decrypted body is not a JSON object")
    is_challenge = data.get("type") == "url_verification"
    if encrypt_key and not is_challenge:
        timestamp, nonce, sent = (headers.get(name) for name in SIGNATURE_HEADERS)
        if not (timestamp and nonce and sent):
            return Rejected("bad_signature", "signature headers are missing")
        expected = signature(timestamp, nonce, encrypt_key, body)
        if not hmac.compare_digest(expected.encode(), sent.encode()):
            return Rejected("bad_signature", "the signature does not match")
    if verification_token:
        header = data.get("header")
        token = data.get("token") if is_challenge or not isinstance(header, dict) else header.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), verification_token.encode()):
            return Rejected("bad_token", "the verification token does not match")
    if is_challenge:
        challenge = data.get("challenge")
        if not isinstance(challenge, str):
            return Rejected("not_json", "the challenge is not a string")
        return Challenge(challenge)
    return Accepted(data)
