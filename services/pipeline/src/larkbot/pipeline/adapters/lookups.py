"""The pipeline's read requests of persisted events: ``pipeline.history`` (messages by id or alias,
rendered with the live context's renderer) and ``pipeline.member`` (what the events say of one member)."""

from __future__ import annotations

from larkbot.canonical.context import (
    HistoryItem,
    HistoryRequest,
    HistoryResponse,
    MemberMessage,
    MemberRequest,
    MemberResponse,
    Segment,
)

from ..core import Projection, alias_for, looks_like_alias
from ..core.model import MessageNode
from .chats import ResidentChats
from .writes import decode_event


async def history(chats: ResidentChats, request: HistoryRequest) -> HistoryResponse:
    """Render persisted messages by id (or alias) with the same pure renderer as the live context; an
    item's provenance is its segment's, so it agrees with the XML the driver is shown."""
    platform, chat_id = request.platform, request.chat_id
    params = chats.params_for(platform, chat_id)
    if params is None:
        return HistoryResponse(found=(), missing=request.message_ids)
    chat = chats.chats.get((platform.value, chat_id))
    resolved: dict[str, str] = {}
    unresolved: list[str] = []
    for requested in request.message_ids:
        owner = chat.projection.resolve_alias(requested) if chat is not None else None
        if owner is not None:
            resolved[requested] = owner
        elif params.alias_message_ids and looks_like_alias(requested):
            unresolved.append(requested)
        else:
            resolved[requested] = requested
    if unresolved:
        from_db = await chats.repo.resolve_aliases(platform.value, chat_id, unresolved)
        resolved.update(from_db)
    rows = await chats.repo.message_history(platform.value, chat_id, set(resolved.values()))
    decoded = [(row_id, decode_event(payload)) for row_id, payload in rows]
    await chats.hydrate(event for _, event in decoded)
    projection = Projection(params, alt_texts=chats.alt_texts)
    for row_id, event in decoded:
        projection.apply(event, row_id)
    by_id = {
        node.message_id: segment
        for node, segment in zip(projection.ic.nodes, projection.segments, strict=True)
        if isinstance(node, MessageNode)
    }
    found: list[HistoryItem] = []
    missing: list[str] = []
    for requested in request.message_ids:
        message_id = resolved.get(requested)
        segment: Segment | None = by_id.get(message_id) if message_id is not None else None
        if message_id is None or segment is None:
            missing.append(requested)
            continue
        found.append(
            HistoryItem(
                message_id=message_id,
                alias=alias_for(chat_id, message_id) if params.alias_message_ids else None,
                xml=segment.xml,
                image_parts=segment.image_parts,
                attachments=segment.attachments,
                sender_id=segment.sender_id,
                is_myself=segment.is_myself,
                is_self_sent=segment.is_self_sent,
                is_bot=segment.is_bot,
                is_deleted=segment.is_deleted,
                is_forwarded=segment.is_forwarded,
                reply_to_message_id=segment.reply_to_message_id,
            )
        )
    return HistoryResponse(found=tuple(found), missing=tuple(missing))


async def member(chats: ResidentChats, request: MemberRequest) -> MemberResponse:
    """What the chat's persisted events say of one member (``pipeline.member``). Read from the
    database, not the projection: the count must include what compaction moved out of the context."""
    platform, chat_id = request.platform, request.chat_id
    rows, deleted = await chats.repo.member_messages(platform.value, chat_id, request.user_id)
    params = chats.params_for(platform, chat_id)
    aliased = params is not None and params.alias_message_ids
    kept = [row for row in rows if row.message_id not in deleted]
    shown = kept[-request.max_messages :] if request.max_messages else []
    return MemberResponse(
        user_id=request.user_id,
        message_count=len(rows),
        messages=tuple(
            MemberMessage(
                message_id=row.message_id,
                alias=alias_for(chat_id, row.message_id) if aliased else None,
                timestamp_sec=row.timestamp_sec,
            )
            for row in shown
        ),
    )
