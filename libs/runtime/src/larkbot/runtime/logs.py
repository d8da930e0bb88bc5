"""Structured JSON logging to stdout with secret masking and correlation ids.

Every record is one JSON object: ``ts``, ``level``, ``service``, ``logger``, ``msg``, the correlation
context (``chat``, ``turn``, ``subject``… bound with :func:`log_context`) and any ``extra=`` fields.
Masking runs on the final line, so a secret cannot leak through a message, an argument, an extra field
or a traceback: registered secret values are replaced by ``***``, and common credential shapes
(bearer tokens, Telegram bot tokens, ``app_secret``/``api_key``/``password`` fields) are masked even when
nobody registered them.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import secrets
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "MASKER",
    "JsonFormatter",
    "SecretMasker",
    "current_trace",
    "log_context",
    "mask",
    "new_traceparent",
    "register_secrets",
    "setup_logging",
]

_context: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("larkbot_log_context", default={})  # noqa: B039

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1***"),
    (re.compile(r"\b(bot)?\d{6,12}:[A-Za-z0-9_-]{30,}\b"), "***"),  # Telegram bot tokens
    (
        re.compile(
            r"(?i)((?:app_secret|api[_-]?key|secret|password|passwd|access_token|tenant_access_token|"
            r"encrypt_key|verification_token|authorization|bot_token)[\"']?\s*[:=]\s*[\"']?)([^\s\"',}&]{4,})"
        ),
        r"\1***",
    ),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{10,}\b"), "***"),  # provider API keys
    (re.compile(r"\b[tu]-[A-Za-z0-9_-]{20,}\b"), "***"),  # Feishu tenant/user access tokens
)
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {"message", "asctime"}


class SecretMasker:
    """Replaces known secret values and credential-shaped substrings with ``***``."""

    def __init__(self) -> None:
        self._secrets: list[str] = []

    def register(self, secrets: Iterable[str]) -> None:
        # Longest first so a secret that contains another is masked whole; very short values would
        # mask ordinary words, so they are left to the patterns.
        merged = {s for s in [*self._secrets, *secrets] if s and len(s) >= 4}
        self._secrets = sorted(merged, key=len, reverse=True)

    def mask(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text


MASKER = SecretMasker()


def register_secrets(secrets: Iterable[str]) -> None:
    MASKER.register(secrets)


def mask(text: str) -> str:
    return MASKER.mask(text)


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_context.get())
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return MASKER.mask(json.dumps(entry, default=str, ensure_ascii=False))


def setup_logging(service: str, level: str = "INFO", stream: Any = None) -> None:
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Library chatter at INFO (reconnect notices, access logs) goes through the same masking formatter,
    # but access logs of /metrics scrapes are noise.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.Formatter.converter = time.gmtime


def current_trace() -> str | None:
    """The W3C ``traceparent`` bound to the current context, if any."""
    trace = _context.get().get("trace")
    return trace if isinstance(trace, str) else None


def new_traceparent() -> str:
    """A fresh W3C ``traceparent`` (version 00, sampled), started where an outside event enters."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Bind correlation fields (chat, turn, subject…) to every record logged inside the block."""
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)
