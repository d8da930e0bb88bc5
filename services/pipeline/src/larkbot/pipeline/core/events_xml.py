"""System nodes → ``<event type t …>``: what each kind of system node shows, attributes in this order.

- ``name_change from_name to_name uid?``; ``reaction emoji actor uid? message_id removed?``;
- ``members_joined`` / ``member_left`` ``actor? members``; ``chat_renamed actor? from? to``;
  ``chat_photo_changed`` / ``bot_added`` / ``bot_removed`` ``actor?``;
- ``message_pinned actor? message_id sender?`` with the pinned message's preview as the body (what the
  context held of it when it was pinned, else what the pin embedded);
- ``topic_created|topic_edited|topic_closed|topic_reopened actor? topic``, or ``topic_renamed actor? from?
  to`` for an edit that renamed the topic;
- a notice: its own ``type``, ``actor? members?``, then its attributes in their order (names made safe,
  clashes prefixed ``x-``), and the platform's own sentence as the body.

Like every rule of the renderer, each depends only on the node (and the alias table claimed in context
order), so an appended event never changes an earlier one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from larkbot.canonical.events import (
    BotAdded,
    BotRemoved,
    ChatNotice,
    ChatPhotoChanged,
    ChatRenamed,
    MemberLeft,
    MembersJoined,
    Sender,
)

from . import xml
from .model import NameChange, PinNote, ReactionNote, SystemNode, TopicNote

if TYPE_CHECKING:
    from .render import Renderer

Pairs = list[tuple[str, str]]


def event_xml(r: Renderer, node: SystemNode) -> tuple[str, str | None]:
    """The ``<event>`` element of ``node`` and the id of the person it is about (the actor), if any."""
    payload = node.payload
    kind = payload.kind
    if isinstance(payload, TopicNote):
        kind = "topic_renamed" if payload.renamed_to is not None else f"topic_{payload.change}"
    elif isinstance(payload, ChatNotice):
        kind = payload.type
    pairs: Pairs = [("type", kind), ("t", r.time(node.timestamp_sec, node.utc_offset_min))]
    body: str | None = None
    if isinstance(payload, NameChange):
        pairs += [("from_name", payload.from_name), ("to_name", payload.to_name), ("uid", payload.user_id)]
        return xml.element("event", pairs, None), payload.user_id
    actor: Sender | None = payload.actor
    pairs += r.person("actor", actor)
    match payload:
        case ReactionNote():
            pairs = [*pairs[:2], ("emoji", payload.emoji), *pairs[2:]]
            pairs.append(("message_id", r.aliases.render(payload.message_id)))
            if payload.removed:
                pairs.append(("removed", "true"))
        case MembersJoined() | MemberLeft():
            pairs.append(("members", r.names(payload.members)))
        case ChatRenamed():
            if payload.from_title is not None:
                pairs.append(("from", payload.from_title))
            pairs.append(("to", payload.to_title))
        case PinNote():
            target = payload.target
            pairs.append(("message_id", r.aliases.render(target.message_id)))
            if target.sender_id is not None:
                pairs.append(("sender", r.params.name_of(target.sender_id, target.sender_name)))
            body = xml.text(target.preview or "")
        case TopicNote():
            if payload.renamed_to is None:
                pairs.append(("topic", payload.topic))
            else:
                if not payload.topic.startswith("#"):
                    pairs.append(("from", payload.topic))
                pairs.append(("to", payload.renamed_to))
        case ChatNotice():
            if payload.members:
                pairs.append(("members", r.names(payload.members)))
            xml.add_attributes(pairs, payload.attributes)
            body = xml.text(payload.text or "")
        case ChatPhotoChanged() | BotAdded() | BotRemoved():
            pass
        case _:
            assert_never(payload)
    return xml.element("event", pairs, body or None), actor.id if actor is not None else None
