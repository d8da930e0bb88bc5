"""Reminders (docs/driver.md "Reminders"): a chat's limits (``chats.<key>.reminders``) and the
deployment's delivery loop (top-level ``reminders``).

Off unless a chat turns them on: the three tools join the chat's tool list, which is part of its cached
prefix and costs tokens in every request.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from ._base import _Section


class ChatRemindersSettings(_Section):
    """What a chat's reminders may hold. ``max_pending`` bounds the chat, ``max_pending_per_person`` each
    person a reminder is for (one for nobody in particular counts only against the chat)."""

    enabled: bool = False
    #: Pending reminders of the chat: enough for a team's week, few enough that the late-binding list
    #: stays short (every pending reminder is shown there).
    max_pending: int = Field(default=20, ge=1, le=200)
    #: Pending reminders for one person: a person asking for a sixth reminder is more likely a game than
    #: a schedule.
    max_pending_per_person: int = Field(default=5, ge=1, le=200)
    #: The furthest ahead a reminder may be set, in days.
    max_ahead_days: int = Field(default=366, ge=1, le=3660)
    #: The longest reminder text, in characters (a reminder is a line, not a document).
    max_text_chars: int = Field(default=300, ge=10, le=2000)

    @model_validator(mode="after")
    def _person_within_chat(self) -> ChatRemindersSettings:
        if self.max_pending_per_person > self.max_pending:
            raise ValueError(
                f"max_pending_per_person ({self.max_pending_per_person}) must be at most max_pending "
                f"({self.max_pending})"
            )
        return self


class RemindersSettings(_Section):
    """The driver's delivery of due reminders, the same for every chat."""

    #: How often each replica looks for due reminders of the chats it holds: a reminder arrives within
    #: about this after its time (one indexed query per round).
    poll_interval_s: float = Field(default=5.0, gt=0, le=60)
    #: Delivered and cancelled reminders are deleted this many days after they ended.
    retention_days: float = Field(default=30.0, gt=0)
