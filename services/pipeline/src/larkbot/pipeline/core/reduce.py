"""IC' = reduce(IC, event): the projection of canonical events (SPEC §2). Pure: no I/O, no clock.

The IC is changed in place and the returned :class:`Change` says which nodes were appended and which
existing ones changed, so rendering stays incremental. Rules:

- ``message``: deduplicated by message id (first arrival wins). A later ``is_self_sent`` copy only ORs the
  flag; the platform's authoritative echo of a synthetic self-sent message replaces its payload but keeps
  its place (arrival time, ``event_seq``) and the self-sent flag. A sender whose name changed since their
  last message gets a ``name_change`` node first. The reply target's sender and a preview are snapshotted:
  from the context's copy of the target, else from the copy the event embedded (``reply_target``). A
  message in a forum topic snapshots the topic's name: the one the context knows, else the one the event
  carries (which the context then learns), else ``#<thread id>``.
- A message's bare ``@username`` mentions are resolved to the user the context knows by that username
  (:mod:`.handles`). A message that arrives after one with a later platform time (to the second) is
  marked ``out_of_order``: it keeps its place in arrival order and renders ``received``.
- ``edit``: changes the target in place (edits of deleted messages are ignored). An edit of a message
  the context does not hold (never seen, or before the cursor) is appended as that message, marked
  edited, with its new state, the editor as sender (on Telegram only the author edits) and the send time
  when the edit carries it; a sender-less edit of an unknown message is ignored (it names nobody to show).
  The message itself arriving afterwards is a repeat of its id: the first arrival wins, so it changes
  nothing (a self-sent copy only ORs the flag, as for any message).
- ``delete``: marks the target deleted; unknown targets are ignored.
- ``reaction`` / ``service`` / ``runtime``: append a node. A rename also sets the IC's title. A pin
  snapshots the pinned message like a reply its target; a topic change snapshots the topic's name
  before the change and records the new one.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import assert_never

from larkbot.canonical.content import AttachmentType
from larkbot.canonical.events import (
    CanonicalEvent,
    ChatRenamed,
    DeleteEvent,
    EditEvent,
    MessageEvent,
    MessagePinned,
    QuotedMessage,
    ReactionEvent,
    RuntimeEvent,
    Sender,
    ServiceEvent,
    TopicChanged,
)

from .handles import learn, resolve
from .model import (
    IC,
    Body,
    MessageNode,
    NameChange,
    Node,
    PinNote,
    ReactionNote,
    ReplySnapshot,
    RuntimeNode,
    SystemNode,
    SystemPayload,
    TopicNote,
    body_of,
    plain_text,
)
from .shared import share_fields_sets

PREVIEW_CHARS = 80
QUOTE_CHARS = 200


@dataclass(slots=True)
class Change:
    appended: list[int] = field(default_factory=list)
    changed: list[int] = field(default_factory=list)
    title_changed: bool = False

    @property
    def empty(self) -> bool:
        return not (self.appended or self.changed or self.title_changed)


def clip(text: str, limit: int) -> str:
    """Whitespace collapsed to single spaces, cut at ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    if flat == text:
        flat = text  # a short reply preview shares its target's text, not a copy of it
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _preview(plain: str, attachments: tuple[AttachmentType, ...]) -> str | None:
    text = clip(plain, PREVIEW_CHARS)
    if text:
        return text
    if attachments:
        return " ".join(f"[{a.value}]" for a in attachments)
    return None


def _snapshot(
    ic: IC, target_id: str, embedded: QuotedMessage | None, quote: str | None = None
) -> ReplySnapshot:
    """The message ``target_id`` as the context holds it, else as the event embedded it."""
    index = ic.by_message.get(target_id)
    target = ic.nodes[index] if index is not None else None
    if isinstance(target, MessageNode):
        kinds = tuple(a.type for a in target.attachments)
        preview = None if target.deleted else _preview(plain_text(target.body), kinds)
        sender = target.sender
        # The node's id string, not the event's copy of it (:func:`_known_id`).
        return ReplySnapshot(
            target.message_id, sender.id, sender.display_name, target.is_self_sent, preview, quote
        )
    if embedded is not None:
        sender_id = embedded.sender.id if embedded.sender else None
        name = embedded.sender.display_name if embedded.sender else None
        return ReplySnapshot(
            target_id,
            sender_id,
            name,
            False,
            _preview(embedded.content.plain_text(), embedded.attachments),
            quote,
        )
    return ReplySnapshot(target_id, None, None, False, None, quote)


def _reply(ic: IC, event: MessageEvent) -> ReplySnapshot | None:
    if event.reply_to_message_id is None:
        return None
    quote = clip(event.reply_quote.plain_text(), QUOTE_CHARS) if event.reply_quote else None
    return _snapshot(ic, event.reply_to_message_id, event.reply_target, quote or None)


def _topic(ic: IC, event: MessageEvent) -> str | None:
    thread = event.thread_id
    if thread is None:
        return None
    known = ic.topics.get(thread)
    if known is None and event.thread_name:
        known = ic.topics[thread] = event.thread_name
    return known or f"#{thread}"


def _topic_note(ic: IC, change: TopicChanged) -> TopicNote:
    before = ic.topics.get(change.thread_id)
    renamed = change.name if change.change == "edited" and change.name and change.name != before else None
    if change.name and change.change in ("created", "edited"):
        ic.topics[change.thread_id] = change.name
    shown = before or (change.name if change.change != "edited" else None) or f"#{change.thread_id}"
    return TopicNote(change.change, change.actor, shown, renamed)


def _append(ic: IC, node: Node, change: Change) -> None:
    change.appended.append(len(ic.nodes))
    ic.nodes.append(node)


def _message(ic: IC, event: MessageEvent, event_seq: int, change: Change) -> None:
    index = ic.by_message.get(event.message_id)
    if index is not None:
        node = ic.nodes[index]
        assert isinstance(node, MessageNode)
        if node.synthetic and not event.is_self_sent:
            node.sender = _shared(ic, event.sender)
            learn(ic, event.sender)
            node.body = _kept(ic, event.content)
            node.attachments = event.attachments
            node.reply = _reply(ic, event)
            node.forward_info = event.forward_info
            node.timestamp_sec = event.timestamp_sec
            node.utc_offset_min = event.utc_offset_min
            node.topic = _topic(ic, event)
            node.synthetic = False
            change.changed.append(index)
        elif event.is_self_sent and not node.is_self_sent:
            node.is_self_sent = True
            change.changed.append(index)
        return
    _new_message(
        ic,
        MessageNode(
            event_seq=event_seq,
            message_id=event.message_id,
            sender=_shared(ic, event.sender),
            body=event.content,
            attachments=event.attachments,
            reply=_reply(ic, event),
            forward_info=event.forward_info,
            received_at_ms=event.received_at_ms,
            timestamp_sec=event.timestamp_sec,
            utc_offset_min=event.utc_offset_min,
            is_self_sent=event.is_self_sent,
            topic=_topic(ic, event),
            synthetic=event.is_self_sent,
        ),
        change,
    )


def _shared(ic: IC, sender: Sender) -> Sender:
    held = ic.senders.get(sender)
    if held is None:
        share_fields_sets(sender)
        held = ic.senders[sender] = sender
    return held


def _known_id(ic: IC, message_id: str) -> str:
    """``message_id`` as the context's node of that message holds it (one string per id, not one per event
    that names it), else as given."""
    index = ic.by_message.get(message_id)
    if index is None:
        return message_id
    node = ic.nodes[index]
    return node.message_id if isinstance(node, MessageNode) else message_id


def _kept(ic: IC, content: Body) -> Body:
    """What a node keeps of ``content``: its mentions resolved (:mod:`.handles`), in its compact form
    (``model.Body``), holding no fields set of its own (:mod:`.shared`)."""
    if isinstance(content, str):
        return content
    body = body_of(resolve(content, ic.usernames))
    if not isinstance(body, str):
        share_fields_sets(body)
    return body


def _new_message(ic: IC, node: MessageNode, change: Change) -> None:
    """Append ``node`` (its sender's rename first), learning its sender and resolving its mentions."""
    sender = node.sender
    last_name = ic.users.get(sender.id)
    if last_name is not None and last_name != sender.display_name:
        rename = NameChange(sender.id, last_name, sender.display_name)
        _append(
            ic,
            SystemNode(
                node.event_seq, "rename", rename, node.received_at_ms, node.timestamp_sec, node.utc_offset_min
            ),
            change,
        )
    ic.users[sender.id] = sender.display_name
    learn(ic, sender)
    node.body = _kept(ic, node.body)
    second = math.floor(node.timestamp_sec)
    if ic.latest_sec is not None and second < ic.latest_sec:
        node.out_of_order = True
    else:
        ic.latest_sec = second
    ic.by_message[node.message_id] = len(ic.nodes)
    _append(ic, node, change)


def _edit(ic: IC, event: EditEvent, event_seq: int, change: Change) -> None:
    index = ic.by_message.get(event.message_id)
    if index is None:
        if event.sender is not None:
            _unseen_edited(ic, event, event.sender, event_seq, change)
        return
    node = ic.nodes[index]
    assert isinstance(node, MessageNode)
    if node.deleted:
        return
    if event.sender is not None:
        learn(ic, event.sender)
    node.body = _kept(ic, event.content)
    node.attachments = event.attachments
    node.edited_at_sec = event.edited_at_sec
    node.edited_offset_min = event.utc_offset_min
    change.changed.append(index)


def _unseen_edited(ic: IC, event: EditEvent, sender: Sender, event_seq: int, change: Change) -> None:
    """The edited message the context never held, as members now see it."""
    _new_message(
        ic,
        MessageNode(
            event_seq=event_seq,
            message_id=event.message_id,
            sender=_shared(ic, sender),
            body=event.content,
            attachments=event.attachments,
            reply=None,
            forward_info=None,
            received_at_ms=event.received_at_ms,
            timestamp_sec=event.sent_at_sec if event.sent_at_sec is not None else event.edited_at_sec,
            utc_offset_min=event.utc_offset_min,
            is_self_sent=False,
            topic=None,
            synthetic=False,
            edited_at_sec=event.edited_at_sec,
            edited_offset_min=event.utc_offset_min,
        ),
        change,
    )


def _delete(ic: IC, event: DeleteEvent, change: Change) -> None:
    for message_id in event.message_ids:
        index = ic.by_message.get(message_id)
        if index is None:
            continue
        node = ic.nodes[index]
        assert isinstance(node, MessageNode)
        if not node.deleted:
            node.deleted = True
            if index not in change.changed:
                change.changed.append(index)


def reduce(ic: IC, event: CanonicalEvent, event_seq: int) -> Change:
    """Apply ``event`` (committed with order-of-record sequence ``event_seq``) to ``ic`` in place."""
    change = Change()
    match event:
        case MessageEvent() | EditEvent():
            # What the IC keeps of the event holds no fields set of its own (``shared``).
            for attachment in event.attachments:
                share_fields_sets(attachment)
            if isinstance(event, MessageEvent):
                _message(ic, event, event_seq, change)
            else:
                _edit(ic, event, event_seq, change)
        case DeleteEvent():
            _delete(ic, event, change)
        case ReactionEvent():
            note = ReactionNote(
                _known_id(ic, event.message_id),
                _shared(ic, event.actor),
                sys.intern(event.emoji),  # a chat's reactions use a few emoji
                event.removed,
            )
            at = (event.received_at_ms, event.timestamp_sec, event.utc_offset_min)
            _append(ic, SystemNode(event_seq, "", note, *at), change)
        case ServiceEvent():
            action = event.action
            share_fields_sets(action)  # kept by its node
            payload: SystemPayload
            match action:
                case MessagePinned():
                    payload = PinNote(action.actor, _snapshot(ic, action.message_id, action.pinned))
                case TopicChanged():
                    payload = _topic_note(ic, action)
                case _:
                    payload = action
            at = (event.received_at_ms, event.timestamp_sec, event.utc_offset_min)
            _append(ic, SystemNode(event_seq, "", payload, *at), change)
            if isinstance(action, ChatRenamed) and ic.title != action.to_title:
                ic.title = action.to_title
                change.title_changed = True
        case RuntimeEvent():
            node = RuntimeNode(
                event_seq,
                event.type,
                event.attributes,
                event.text,
                event.received_at_ms,
                event.timestamp_sec,
                event.utc_offset_min,
            )
            _append(ic, node, change)
        case _:
            assert_never(event)
    return change
