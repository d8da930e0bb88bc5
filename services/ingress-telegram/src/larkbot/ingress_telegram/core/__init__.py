"""The pure core of ingress-telegram: no asyncio, network, database or Telegram client imports.

- :class:`TelegramAdapter` — raw Bot API ``Update`` JSON → canonical events (also used by
  ``larkbot replay --platform telegram``); :class:`Adapted` is its result.
- :class:`MalformedUpdate` / :class:`UnsupportedUpdate` — why an update was refused (both
  ``ContractError``: dead-lettered, never retried).
- :func:`to_telegram_html` — Markdown → Telegram HTML messages within the length limit.
- :class:`Pacer` — send pacing; :mod:`.ledger` — the sent-ledger's records and decisions;
  :mod:`.retries` — which failures of a send are tried again.
"""

from __future__ import annotations

from .adapt import ALLOWED_UPDATES, Adapted, TelegramAdapter
from .errors import MalformedUpdate, UnsupportedUpdate
from .ledger import Decision, Record, State, decide
from .markdown import MAX_MESSAGE_UTF16, to_telegram_html
from .pacing import Limits, Pacer, is_group_chat
from .retries import SEND_RETRY, send_failure

__all__ = [
    "ALLOWED_UPDATES",
    "MAX_MESSAGE_UTF16",
    "SEND_RETRY",
    "Adapted",
    "Decision",
    "Limits",
    "MalformedUpdate",
    "Pacer",
    "Record",
    "State",
    "TelegramAdapter",
    "UnsupportedUpdate",
    "decide",
    "is_group_chat",
    "send_failure",
    "to_telegram_html",
]
