"""The playground group as its members see it: who is in it, what each posted (as last edited), what they
deleted, and their reactions. Every action returns the update Telegram would send the bot, or ``None``
when Telegram sends none (a deletion; a reaction set to what it already was).

Refusals are :class:`Refused` with the HTTP status the control API answers: an unknown message (404),
someone else's message (403), an invalid value (400).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from . import playground_updates as tg

DEFAULT_MEMBERS: Final = ("Alice", "Bob", "Carol")
MAX_NAME: Final = 64  # Telegram's limit for a first name
MAX_TEXT: Final = 4096  # UTF-16 code units, as Telegram counts them
MAX_CAPTION: Final = 1024
FIRST_USER_ID: Final = 100000


class Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Photo:
    """A file a member posted (a photo, or with ``kind`` ``voice``/``audio`` a recording)."""

    file_id: str
    content_type: str
    kind: str = "photo"


@dataclass(slots=True)
class Posted:
    """A member's message: ``message`` as last sent to the bot (an edit replaces it)."""

    user: str
    message: dict[str, Any]
    photo: Photo | None = None
    edited: bool = False
    deleted: bool = False


class Group:
    """``chat``: the Bot API ``Chat``; ``new_id``: the chat's message-id sequence (shared with the bot's
    messages); ``bot_messages``: what the bot sent, for replies to it."""

    def __init__(
        self,
        chat: dict[str, Any],
        new_id: Callable[[], int],
        bot_messages: Callable[[], list[dict[str, Any]]],
    ) -> None:
        self.chat = chat
        self._new_id = new_id
        self._bot_messages = bot_messages
        self.members: list[str] = list(DEFAULT_MEMBERS)
        self.user_ids: dict[str, int] = {}
        self.posted: dict[int, Posted] = {}
        #: (message id, member) → that member's reaction emoji, as Telegram shows them.
        self.reactions: dict[tuple[int, str], list[str]] = {}

    def join(self, name: str) -> dict[str, Any]:
        """The member called ``name`` as a Bot API ``User`` (added on first use)."""
        if not name.strip() or len(name) > MAX_NAME:
            raise Refused(400, f"a member's name is 1 to {MAX_NAME} characters")
        if name not in self.members:
            self.members.append(name)
        user_id = self.user_ids.setdefault(name, FIRST_USER_ID + len(self.user_ids))
        return tg.member_user(user_id, name)

    def say(
        self,
        name: str,
        text: str,
        date: int,
        *,
        reply_to: int | None = None,
        photo: tuple[Photo, list[dict[str, Any]]] | None = None,
        recording: tuple[Photo, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """``recording``: a voice note or an audio file (``Photo.kind``) and its Bot API object."""
        attached = photo[0] if photo is not None else recording[0] if recording is not None else None
        limit = MAX_CAPTION if attached is not None else MAX_TEXT
        if attached is None and not text.strip():
            raise Refused(400, "text is required")
        if tg.utf16_len(text) > limit:
            raise Refused(400, f"longer than Telegram's {limit} characters")
        user = self.join(name)
        target = self._target(reply_to) if reply_to is not None else None
        sizes = photo[1] if photo is not None else None
        media = (recording[0].kind, recording[1]) if recording is not None else None
        built = tg.message(
            self._new_id(), user, self.chat, date, text, reply_to=target, photo=sizes, media=media
        )
        self.posted[built["message_id"]] = Posted(name, built, attached)
        return {"message": built}

    def edit(self, name: str, message_id: int, text: str, date: int) -> dict[str, Any]:
        posted = self._own(name, message_id)
        if posted.photo is None and not text.strip():
            raise Refused(400, "text is required")
        if tg.utf16_len(text) > (MAX_CAPTION if posted.photo is not None else MAX_TEXT):
            raise Refused(400, "longer than Telegram allows")
        posted.message = tg.edited(posted.message, text, date)
        posted.edited = True
        return {"edited_message": posted.message}

    def delete(self, name: str, message_id: int) -> None:
        """Gone for the members; the Bot API has no update for it, so the bot is not told."""
        self._own(name, message_id).deleted = True

    def react(self, name: str, message_id: int, emoji: str | None, date: int) -> dict[str, Any] | None:
        """``emoji`` replaces the member's reaction (one each, as for a member without Premium); ``None``
        removes it. Unchanged: no update, as on Telegram."""
        if emoji is not None and emoji not in tg.REACTION_EMOJI:
            raise Refused(400, f"{emoji!r} is not among Telegram's reaction emoji")
        self._target(message_id)
        user = self.join(name)
        old = self.reactions.get((message_id, name), [])
        new = [emoji] if emoji is not None else []
        if old == new:
            return None
        self.reactions[(message_id, name)] = new
        return {"message_reaction": tg.reaction(self.chat, message_id, user, date, old, new)}

    def reactions_on(self, message_id: int) -> dict[str, list[str]]:
        """Emoji → the members who reacted with it, in the order they joined."""
        found: dict[str, list[str]] = {}
        for (target, name), emoji in self.reactions.items():
            if target == message_id:
                for one in emoji:
                    found.setdefault(one, []).append(name)
        return found

    def _target(self, message_id: int) -> dict[str, Any]:
        posted = self.posted.get(message_id)
        if posted is not None and not posted.deleted:
            return posted.message
        for sent in self._bot_messages():
            if sent["message_id"] == message_id:
                return sent
        raise Refused(404, f"no message {message_id} in the group")

    def _own(self, name: str, message_id: int) -> Posted:
        posted = self.posted.get(message_id)
        if posted is None or posted.deleted:
            raise Refused(404, f"no message {message_id} of a member in the group")
        if posted.user != name:
            raise Refused(403, f"message {message_id} is {posted.user}'s, not {name}'s")
        return posted
