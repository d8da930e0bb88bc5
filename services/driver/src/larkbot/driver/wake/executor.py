"""Executes the primary's tool calls against the platform, the pipeline and media workers.

Every id the model gives is resolved (alias or canonical, live context first, then ``pipeline.history``)
before any platform call; an id that resolves to nothing is an error result, never a platform error.
Results are short deterministic texts (they become part of the cached prefix).

A rendered file-id (``<rendered message id>:<index>``) names no platform file. ``read_image`` resolves its
message part like any message id, then takes the attachment with that index from the message's
``AttachmentRef`` s: the live segment's, else those of a history item (one already read by
``read_old_messages`` in this wake-up, or looked up now), so images of old messages the model has seen
resolve too. The media worker gets the platform's file key and, when known, the stored original's key.

``send_message`` answers with the id the chat log shows for the sent message (its alias where the chat
renders aliases, computed as the pipeline does), so the model can reply to it or recall it before the
platform's echo arrives. ``recall_message`` deletes only the bot's own messages: those the context or
history marks as the bot's, and those sent in this wake-up.
``read_file`` runs in ``files.tools`` on the same resolution (:meth:`ToolExecutor.attachment`).
``ban_spammer`` runs in ``moderation.moderation`` (only where the chat enables it), on the same resolution;
the reminder tools in ``reminders.reminders`` (only where the chat turns reminders on).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from larkbot.canonical.actions import ActionResult, DeleteMessageAction, ReactAction, SendMessageAction
from larkbot.canonical.aliases import alias_for
from larkbot.canonical.content import AttachmentType
from larkbot.canonical.context import AttachmentRef, HistoryItem, HistoryRequest, Segment
from larkbot.canonical.llm import TextPart, UserPart
from larkbot.canonical.media import ReadImageRequest
from larkbot.canonical.names import Platform
from larkbot.driver.files import tools as file_tools
from larkbot.driver.files.core.files import FileLimits
from larkbot.driver.memory import tools as memory_tools
from larkbot.driver.memory.core.evidence import Provenance
from larkbot.driver.memory.memory_tools import MemoryAccess, MemoryTools
from larkbot.driver.moderation import tools as moderation_tools
from larkbot.driver.moderation.moderation import Moderation, ModerationAccess
from larkbot.driver.reminders import tools as reminder_tools
from larkbot.driver.reminders.reminders import ReminderAccess
from larkbot.driver.shell import tools as shell_tools
from larkbot.driver.shell.shell import ShellAccess
from larkbot.driver.tools.core import tools
from larkbot.driver.tools.handlers import Handlers, Result, dispatch, text
from larkbot.runtime.bus import BusUnavailable
from larkbot.runtime.db import DatabaseUnavailable

from ..errors import ActionUnanswered
from .clients import ACTION_ATTEMPTS, BusClients
from .clock import Clock
from .core import tools as wake_tools
from .core.clip import clip_xml
from .core.estimate import CHARS_PER_TOKEN
from .core.ids import alias_table, mentioned_uids
from .core.outcomes import settled_text, settlement
from .core.turn import ToolDone, ToolRun

#: ``read_file``'s limits where a chat has no ``files`` settings (the settings' defaults).
DEFAULT_FILE_LIMITS: Final = FileLimits(max_chars=8000, max_bytes=20 * 1024 * 1024)
#: Attachment types a media worker renders as a picture; any other type must say ``image/*`` in its mime.
_IMAGE_TYPES = frozenset({AttachmentType.PHOTO, AttachmentType.STICKER, AttachmentType.ANIMATION})


class ToolExecutor:
    """One per wake-up: holds the context snapshot the turn runs on and memoizes id resolution."""

    def __init__(
        self,
        clients: BusClients,
        clock: Clock,
        platform: str,
        chat_id: str,
        segments: tuple[Segment, ...],
        *,
        action_attempts: int = ACTION_ATTEMPTS,
        max_segment_tokens: int,
        memory: MemoryAccess | None = None,
        aliased: bool = False,
        shell: ShellAccess | None = None,
        moderation: ModerationAccess | None = None,
        reminders: ReminderAccess | None = None,
        files: FileLimits = DEFAULT_FILE_LIMITS,
    ) -> None:
        self.clients = clients
        #: The chat log shows message ids as aliases (``larkbot.canonical.aliases``).
        self.aliased = aliased
        self.action_attempts = action_attempts
        self.max_segment_tokens = max_segment_tokens
        self.clock = clock
        self.platform = Platform(platform)
        self.chat_id = chat_id
        self.segments = segments
        self.aliases = alias_table(segments)
        #: Canonical ids of the messages sent in this wake-up, in order.
        self.sent: list[str] = []
        #: canonical message id → its attachment refs (live segments first, then history items).
        self.attachments = {s.message_id: s.attachments for s in segments if s.message_id is not None}
        #: canonical message id → who wrote it and how it came (memory evidence).
        self.provenance = {
            s.message_id: Provenance.of_segment(s)
            for s in segments
            if s.message_id is not None and s.node_type == "message"
        }
        self.memory = MemoryTools(memory, self._evidence, clock.now_ms) if memory is not None else None
        self.shell = shell
        self.reminders = reminders
        self.files = files
        self.moderation = (
            Moderation(moderation, clients, self.platform, chat_id, self._evidence, action_attempts)
            if moderation is not None
            else None
        )

    async def run(self, call: ToolRun) -> ToolDone:
        handler = HANDLERS[call.name]
        # A wake-up's tool calls run one at a time (``core.turn`` yields them in order): what this call
        # appends to ``sent`` is its own.
        sent_before = len(self.sent)
        try:
            ok, parts, final = await handler(self, call, call.args)
        except BusUnavailable as exc:
            if call.name in tools.PARTICIPATION_TOOLS:
                # Nobody answered any attempt (the ingress is restarting, say). The step was written
                # ahead: it stays pending and the chat's retries redo it under the same idempotency key,
                # which the platform side deduplicates if an attempt did act.
                raise ActionUnanswered(f"{call.name} got no answer: {exc}") from exc
            ok, parts, final = False, text("error: the service is unavailable, try later"), False
        except DatabaseUnavailable:
            if call.name in tools.WRITE_AHEAD_TOOLS:
                # Its step was written ahead: the wake-up is retried and redoes it (``runner``).
                raise
            # A work tool's store (memories, reminders, tasks) is busy: the model may go on without it.
            ok, parts, final = False, text("error: the service is unavailable, try later"), False
        sent = tuple(self.sent[sent_before:])
        return ToolDone(ok, parts, self.clock.now_ms(), final=final, message_ids=sent)

    async def resolve(self, ids: list[str]) -> dict[str, str]:
        unknown = [i for i in ids if i not in self.aliases]
        if unknown:
            request = HistoryRequest(platform=self.platform, chat_id=self.chat_id, message_ids=tuple(unknown))
            found = await self.clients.history(request)
            self._remember(found.found)
        return {i: self.aliases[i] for i in ids if i in self.aliases}

    def _remember(self, items: Iterable[HistoryItem]) -> None:
        for item in items:
            self.aliases.setdefault(item.message_id, item.message_id)
            if item.alias:
                self.aliases.setdefault(item.alias, item.message_id)
            self.attachments.setdefault(item.message_id, item.attachments)
            self.provenance.setdefault(item.message_id, Provenance.of_history(item))

    async def _evidence(
        self, ids: Sequence[str]
    ) -> tuple[list[tuple[str, str | None]], Mapping[str, Provenance]]:
        resolved = await self.resolve(list(ids))
        # An id can resolve through a live segment that is not the message itself (an event about it).
        unknown = tuple(dict.fromkeys(c for c in resolved.values() if c not in self.provenance))
        if unknown:
            request = HistoryRequest(platform=self.platform, chat_id=self.chat_id, message_ids=unknown)
            self._remember((await self.clients.history(request)).found)
        return [(i, resolved.get(i)) for i in ids], self.provenance

    async def send(self, call: ToolRun, args: dict[str, Any]) -> Result:
        reply_to = args.get("reply_to")
        canonical_reply: str | None = None
        if reply_to is not None:
            canonical_reply = (await self.resolve([reply_to])).get(reply_to)
            if canonical_reply is None:
                return False, text(f"error: no message with id {reply_to!r}"), False
        action = SendMessageAction(
            platform=self.platform,
            chat_id=self.chat_id,
            idempotency_key=call.idempotency_key,
            deadline_ms=call.deadline_ms,
            text=args["text"],
            reply_to_message_id=canonical_reply,
            mentions=mentioned_uids(args["text"]),
        )
        result = await self.clients.act(action, self.action_attempts)
        if not result.ok or not result.message_ids:
            return self._outcome(result, action.kind, "sent")
        shown = [self._sent(message_id) for message_id in result.message_ids]
        ids = f"id {shown[0]}" if len(shown) == 1 else "ids " + ", ".join(shown)
        return True, text(f"sent ({ids})"), False

    def _sent(self, message_id: str) -> str:
        """Remember a message the bot has just sent (its echo may not be in the context yet) and return
        the id the chat log shows for it: its alias, or its canonical id when aliases are off or the
        alias is already another message's (the renderer's collision rule)."""
        self.sent.append(message_id)
        self.aliases.setdefault(message_id, message_id)
        self.provenance.setdefault(message_id, Provenance(message_id, None, True, True, False, False, None))
        if not self.aliased:
            return message_id
        alias = alias_for(self.chat_id, message_id)
        return alias if self.aliases.setdefault(alias, message_id) == message_id else message_id

    async def recall(self, call: ToolRun, args: dict[str, Any]) -> Result:
        shown: str = args["message_id"]
        target = (await self.resolve([shown])).get(shown)
        if target is None:
            return False, text(f"error: no message with id {shown!r}"), False
        known = self.provenance.get(target)
        if known is None:
            request = HistoryRequest(platform=self.platform, chat_id=self.chat_id, message_ids=(target,))
            self._remember((await self.clients.history(request)).found)
            known = self.provenance.get(target)
        if known is None or not known.is_myself:
            return False, text(f"error: {shown!r} is not your message; you can recall only your own"), False
        if known.is_deleted:
            return False, text(f"error: {shown!r} is already deleted"), False
        action = DeleteMessageAction(
            platform=self.platform,
            chat_id=self.chat_id,
            idempotency_key=call.idempotency_key,
            deadline_ms=call.deadline_ms,
            message_ids=(target,),
        )
        return self._outcome(await self.clients.act(action, self.action_attempts), action.kind, "recalled")

    async def react(self, call: ToolRun, args: dict[str, Any]) -> Result:
        target = (await self.resolve([args["message_id"]])).get(args["message_id"])
        if target is None:
            return False, text(f"error: no message with id {args['message_id']!r}"), False
        action = ReactAction(
            platform=self.platform,
            chat_id=self.chat_id,
            idempotency_key=call.idempotency_key,
            deadline_ms=call.deadline_ms,
            message_id=target,
            emoji=args["emoji"],
            remove=bool(args.get("remove", False)),
        )
        return self._outcome(
            await self.clients.act(action, self.action_attempts),
            action.kind,
            "reaction removed" if action.remove else "reacted",
        )

    def _outcome(self, result: ActionResult, kind: str, done: str) -> Result:
        if result.ok:
            return True, text(done), False
        # Parts of a long text delivered before it stopped are messages the members see (and may recall).
        delivered = [self._sent(m) for m in result.message_ids] if kind == "send_message" else []
        told = settled_text(result, kind, self.platform.value, delivered)
        # An unknown outcome closes the call: a follow-up could only repeat what may have been done. So
        # does a spent platform budget: every follow-up action would be refused the same way.
        return False, text(told), settlement(result) in ("unknown", "budget")

    async def read_old(self, call: ToolRun, args: dict[str, Any]) -> Result:
        ids = tuple(args["message_ids"])
        found = await self.clients.history(
            HistoryRequest(platform=self.platform, chat_id=self.chat_id, message_ids=ids)
        )
        self._remember(found.found)
        parts: list[UserPart] = []
        for item in found.found:
            # Old messages are clipped like live ones: a looked-up message must not overflow the turn.
            parts.append(TextPart(text=clip_xml(item.xml, self.max_segment_tokens * CHARS_PER_TOKEN)))
            parts.extend(item.image_parts)
        if found.missing:
            parts.append(TextPart(text="not found: " + ", ".join(found.missing)))
        return bool(found.found), tuple(parts), False

    async def attachment(self, file_id: str) -> tuple[str, AttachmentRef] | None:
        """The canonical message id and the attachment a rendered file-id names, or ``None``."""
        shown, _, index = file_id.rpartition(":")
        if not shown or not index.isascii() or not index.isdigit():
            return None
        message_id = (await self.resolve([shown])).get(shown)
        if message_id is None:
            return None
        wanted = int(index)
        found = next((a for a in self.attachments.get(message_id, ()) if a.index == wanted), None)
        return (message_id, found) if found is not None else None

    async def read_image(self, call: ToolRun, args: dict[str, Any]) -> Result:
        file_id: str = args["file_id"]
        target = await self.attachment(file_id)
        if target is None:
            return False, text(f"error: no attachment with file-id {file_id!r}"), False
        message_id, ref = target
        if self.platform is Platform.FEISHU and ref.type is AttachmentType.STICKER:
            # Feishu's message resource API serves no sticker to a bot (see pipeline.core.admission).
            return False, text(f"error: Feishu does not let bots see stickers ({file_id!r})"), False
        if ref.type not in _IMAGE_TYPES and not (ref.mime or "").startswith("image/"):
            return (
                False,
                text(f"error: the attachment {file_id!r} is a {ref.type.value}, not an image"),
                False,
            )
        request = ReadImageRequest(
            request_id=uuid.uuid4().hex,
            platform=self.platform,
            chat_id=self.chat_id,
            message_id=message_id,
            file_id=ref.file_id,
            attachment_type=ref.type,
            blob_key=ref.blob_key,
            detail=args["detail"],
            deadline_ms=call.deadline_ms,
        )
        answer = await self.clients.read_image(request, (call.deadline_ms - self.clock.now_ms()) / 1000)
        if not answer.ok or answer.image is None:
            code = answer.error.code if answer.error else "failed"
            return False, text(f"error: image could not be read ({code})"), False
        parts: list[UserPart] = [answer.image]
        if answer.alt_text:
            parts.append(TextPart(text=answer.alt_text))
        return True, tuple(parts), False


#: The handlers of every feature's tools, one line per feature (``tools.handlers``); the wake-up's own
#: are the methods above.
HANDLERS: Final = dispatch(
    Handlers(
        wake_tools.router,
        {
            wake_tools.SEND: ToolExecutor.send,
            wake_tools.REACT: ToolExecutor.react,
            wake_tools.READ_OLD: ToolExecutor.read_old,
            wake_tools.READ_IMAGE: ToolExecutor.read_image,
            wake_tools.RECALL: ToolExecutor.recall,
        },
    ),
    file_tools.handlers,
    memory_tools.handlers,
    moderation_tools.handlers,
    reminder_tools.handlers,
    shell_tools.handlers,
)
