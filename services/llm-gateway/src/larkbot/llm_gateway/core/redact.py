"""Redaction of request dumps (pure): credentials out of headers, inline image bytes out of bodies.

A dump keeps everything a human needs to debug a call — the full JSON structure and text — but never a
credential, and images are replaced by their size and a digest (they are in the object store anyway).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"})
_DATA_URL = re.compile(r"^data:([^;,]+);base64,(.+)$", re.DOTALL)
_BASE64_KEYS = frozenset({"data", "encrypted_content"})


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: "***" if k.lower() in SECRET_HEADERS else v for k, v in headers.items()}


def _digest(text: str) -> str:
    return f"<{len(text)} base64 chars sha256:{hashlib.sha256(text.encode()).hexdigest()[:16]}>"


def redact_body(value: Any, mask: Callable[[str], str]) -> Any:
    """A copy of ``value`` with data URLs and base64 payloads summarized and strings masked."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _BASE64_KEYS and isinstance(item, str) and len(item) > 64:
                out[key] = _digest(item)
            else:
                out[key] = redact_body(item, mask)
        return out
    if isinstance(value, list):
        return [redact_body(item, mask) for item in value]
    if isinstance(value, str):
        match = _DATA_URL.match(value)
        if match is not None:
            return f"data:{match.group(1)};base64,{_digest(match.group(2))}"
        return mask(value)
    return value
