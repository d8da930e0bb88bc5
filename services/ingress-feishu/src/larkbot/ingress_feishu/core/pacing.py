"""Send pacing: at most 5 messages per second per chat and 50 per second per app (Feishu's limits).

Spacing rather than bursts: a chat's sends are at least 1/5 s apart and the app's at least 1/50 s apart,
which keeps every one-second window within both limits without tracking windows. A 429 pushes the whole
app back to the reset time Feishu names. Pure: the caller passes monotonic ``now`` and sleeps the
returned delay.
"""

from __future__ import annotations

from collections import OrderedDict


class SendPacer:
    def __init__(self, per_chat_per_s: float = 5.0, per_app_per_s: float = 50.0, max_chats: int = 10_000):
        self.chat_gap = 1.0 / per_chat_per_s
        self.app_gap = 1.0 / per_app_per_s
        self.max_chats = max_chats
        self._chat_next: OrderedDict[str, float] = OrderedDict()
        self._app_next = 0.0

    def reserve(self, chat_id: str, now: float) -> float:
        """Reserve the next send slot of ``chat_id``; returns how long to wait before sending."""
        at = max(now, self._chat_next.get(chat_id, 0.0), self._app_next)
        self._chat_next[chat_id] = at + self.chat_gap
        self._chat_next.move_to_end(chat_id)
        while len(self._chat_next) > self.max_chats:
            self._chat_next.popitem(last=False)
        self._app_next = at + self.app_gap
        return at - now

    def back_off(self, until: float) -> None:
        """Feishu said 429: no send before ``until`` (monotonic seconds)."""
        self._app_next = max(self._app_next, until)
