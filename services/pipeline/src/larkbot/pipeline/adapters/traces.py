"""The traces a commit continues: each event came with the ``traceparent`` of the ingress that received
it, and a commit serves many chats' events at once, so its spans are drawn per chat afterwards
(``runtime.tracing.record_span``):

- ``pipeline commit``, a child of the chat's newest committed event, linked to the chat's other events of
  the batch; from when the first of them was read (a wait for media shows) to the end of the commit;
- ``pipeline render``, its child: reducing and rendering the batch into the chat's context update, whose
  ``traceparent`` it becomes — the driver continues the trace from there.

With tracing off nothing is drawn and the chat's update carries its newest event's ``traceparent``, so
logs still correlate by trace id.
"""

from __future__ import annotations

from collections.abc import Iterable

from larkbot.runtime import tracing

from ..core.offsets import Ticket

ChatKey = tuple[str, str]


class CommitTraces:
    """The traced events of one commit, per chat, in commit order."""

    __slots__ = ("_events", "_newest", "batch", "on")

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.on = tracing.enabled()
        self._events: dict[ChatKey, list[Ticket]] = {}
        self._newest: dict[ChatKey, str] = {}

    def add(self, key: ChatKey, ticket: Ticket) -> None:
        if ticket.trace is None:
            return
        if self.on:
            self._events.setdefault(key, []).append(ticket)
        else:
            self._newest[key] = ticket.trace

    def spans(
        self, changed: Iterable[ChatKey], commit_ns: tuple[int, int], render_ns: tuple[int, int]
    ) -> dict[ChatKey, str]:
        """Draw the commit's spans (``(start, end)`` of the commit and of the rendering, ``time_ns``);
        the ``traceparent`` each changed chat's update carries."""
        if not self._events:
            return self._newest
        started, committed = commit_ns
        carried: dict[ChatKey, str] = {}
        rendered = set(changed)
        for key, tickets in self._events.items():
            newest = tickets[-1]
            commit = tracing.record_span(
                "pipeline commit",
                min(started, *(t.read_ns for t in tickets if t.read_ns)),
                committed,
                parent=newest.trace,
                links=(t.trace for t in tickets[:-1]),
                attributes={"larkbot.chat_events": len(tickets), "larkbot.batch_events": self.batch},
            )
            if key in rendered and commit is not None:
                render = tracing.record_span("pipeline render", *render_ns, parent=commit)
                if render is not None:
                    carried[key] = render
        return carried
