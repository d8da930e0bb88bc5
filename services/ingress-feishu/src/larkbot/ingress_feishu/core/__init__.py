"""The pure core of ingress-feishu: adaptation, outbound formatting, pacing, names, webhook checks.

No asyncio, NATS, HTTP or lark-oapi here; ``larkbot replay --platform feishu`` uses :class:`FeishuAdapter`.
"""

from __future__ import annotations

from .adapter import EVENT_TYPES, Adapted, AdaptResult, Dropped, FeishuAdapter, FeishuEvent, NeedsChat
from .errors import FeishuPayloadError, MalformedPayload, UnknownEventType, UnsupportedEmoji

__all__ = [
    "EVENT_TYPES",
    "AdaptResult",
    "Adapted",
    "Dropped",
    "FeishuAdapter",
    "FeishuEvent",
    "FeishuPayloadError",
    "MalformedPayload",
    "NeedsChat",
    "UnknownEventType",
    "UnsupportedEmoji",
]
