"""The pure core of the pipeline: reduce canonical events into the IC and render it as XML segments.

No asyncio, NATS, SQL or HTTP here. Public API::

    RenderParams(platform, chat_id, bot_user_id=None, bot_username=None, maintainers=frozenset(),
                 contact_names={}, blocked_users=frozenset(), alias_message_ids=False,
                 deployment_utc_offset_min=0, chat_utc_offset_min=None, chat_title=None)
    Projection(params, *, cursor=0, alt_texts=None)
        .apply(event, event_seq=None) -> list[ContextOp]     .segments -> tuple[Segment, ...]
        .last_segment() -> Segment | None   .newest_received_ms   .xml_chars
        .xml() -> str   .rerender(params=None) -> ResetOp     .title   .resolve_alias(alias)
    replay(pairs, params, *, cursor=0, alt_texts=None) -> Projection
    replay_chat(events, params) -> str
"""

from __future__ import annotations

from .aliases import AliasTable, alias_for, looks_like_alias
from .model import IC, MessageNode, NameChange, Node, ReplySnapshot, RuntimeNode, SystemNode
from .params import RenderParams
from .projection import Projection, replay, replay_chat
from .reduce import Change, reduce
from .render import Renderer, attachment_key, render_keys, transcript_key
from .timefmt import format_time

__all__ = [
    "IC",
    "AliasTable",
    "Change",
    "MessageNode",
    "NameChange",
    "Node",
    "Projection",
    "RenderParams",
    "Renderer",
    "ReplySnapshot",
    "RuntimeNode",
    "SystemNode",
    "alias_for",
    "attachment_key",
    "format_time",
    "looks_like_alias",
    "reduce",
    "render_keys",
    "replay",
    "replay_chat",
    "transcript_key",
]
