"""A chat's projection: the IC, its rendered segments, and the context ops each event produces.

:class:`Projection` is the pure heart of the service and of ``larkbot replay``: ``apply`` reduces one
committed event and re-renders only the nodes it appended or changed, returning the ops a consumer applies
to its copy (``ReplaceOp`` for each changed node in place, one ``AppendOp`` for new nodes). Segments are
re-rendered only for those nodes, so an append never touches an earlier segment's bytes. Each rendering
is kept beside its node (:data:`~.segments.Kept`), and segments are built from the two when they
are published or asked for (:attr:`Projection.segments`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from larkbot.canonical.context import AppendOp, ContextOp, ReplaceOp, ResetOp, Segment
from larkbot.canonical.events import CanonicalEvent

from ..errors import BeforeCursor
from .model import IC
from .params import RenderParams
from .reduce import Change, reduce
from .render import Renderer
from .segments import Kept, kept_chars, kept_of, kept_xml, segment_of


class Projection:
    """IC + RC of one chat, holding exactly the nodes created by events with ``event_seq > cursor``."""

    def __init__(
        self, params: RenderParams, *, cursor: int = 0, alt_texts: Mapping[str, str] | None = None
    ) -> None:
        self.params = params
        self.cursor = cursor
        self.ic = IC()
        self.alt_texts: Mapping[str, str] = alt_texts if alt_texts is not None else {}
        self._renderer = Renderer(params, self.alt_texts)
        #: What rendering each node of ``ic.nodes`` produced, at the same index.
        self._rendered: list[Kept] = []
        self.last_event_seq = cursor

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Every segment, built afresh (O(nodes): :meth:`last_segment` and :attr:`xml_chars` for less)."""
        return tuple(map(segment_of, self.ic.nodes, self._rendered))

    def last_segment(self) -> Segment | None:
        nodes = self.ic.nodes
        return segment_of(nodes[-1], self._rendered[-1]) if nodes else None

    @property
    def newest_received_ms(self) -> int | None:
        """The latest arrival time of a segment (``None`` when there is none)."""
        return max((node.received_at_ms for node in self.ic.nodes), default=None)

    @property
    def xml_chars(self) -> int:
        """The length of every segment's XML, summed."""
        return sum(map(kept_chars, self._rendered))

    @property
    def title(self) -> str | None:
        return self.ic.title if self.ic.title is not None else self.params.chat_title

    def resolve_alias(self, alias: str) -> str | None:
        return self._renderer.aliases.resolve(alias)

    def shown_id(self, message_id: str) -> str:
        """How ``message_id`` renders here (claims the alias if it was never rendered)."""
        return self._renderer.aliases.render(message_id)

    def apply(self, event: CanonicalEvent, event_seq: int | None = None) -> list[ContextOp]:
        """Reduce ``event`` (``event_seq``: its order-of-record sequence; default: the next one) and
        return the ops that bring a copy of the previous segments up to date (empty: nothing changed)."""
        return self.render(self.reduce(event, event_seq))

    def reduce(self, event: CanonicalEvent, event_seq: int | None = None) -> Change:
        """The first half of :meth:`apply` (kept apart so the shell can time each half)."""
        seq = self.last_event_seq + 1 if event_seq is None else event_seq
        if seq <= self.cursor:
            raise BeforeCursor("an event at or before the cursor cannot enter the context")
        self.last_event_seq = max(self.last_event_seq, seq)
        return reduce(self.ic, event, seq)

    def render(self, change: Change) -> list[ContextOp]:
        """The second half of :meth:`apply`: render what ``change`` touched."""
        ops: list[ContextOp] = []
        nodes = self.ic.nodes
        kept = self._rendered
        render = self._renderer.render
        for index in change.changed:
            node = nodes[index]
            rendered = render(node)
            kept[index] = kept_of(node, rendered)
            ops.append(ReplaceOp(segment=segment_of(node, rendered)))
        if change.appended:
            new: list[Segment] = []
            for index in change.appended:
                node = nodes[index]
                rendered = render(node)
                kept.append(kept_of(node, rendered))
                new.append(segment_of(node, rendered))
            ops.append(AppendOp(segments=tuple(new)))
        return ops

    def rerender(self, params: RenderParams | None = None) -> ResetOp:
        """Render every node afresh (new identity or settings): the only op that may rewrite the prefix."""
        if params is not None:
            self.params = params
        self._renderer = Renderer(self.params, self.alt_texts)
        render = self._renderer.render
        self._rendered = [kept_of(node, render(node)) for node in self.ic.nodes]
        return ResetOp(segments=self.segments)

    def xml(self) -> str:
        """The whole rendered context as text, one segment per line."""
        return "\n".join(map(kept_xml, self._rendered))


def replay(
    events: Iterable[tuple[int, CanonicalEvent]],
    params: RenderParams,
    *,
    cursor: int = 0,
    alt_texts: Mapping[str, str] | None = None,
) -> Projection:
    """Cold replay of committed ``(event_seq, event)`` pairs in the order of record."""
    projection = Projection(params, cursor=cursor, alt_texts=alt_texts)
    for seq, event in events:
        projection.apply(event, seq)
    return projection


def replay_chat(events: Iterable[CanonicalEvent], params: RenderParams) -> str:
    """The full RC XML of one chat from its canonical events in arrival order, as ``larkbot replay``
    prints it. Events of other chats are skipped; a redelivered event (same ``dedup_key``) is applied once,
    as the ``events`` table's unique key does in the service."""
    projection = Projection(params)
    seen: set[str] = set()
    for event in events:
        if event.platform != params.platform or event.chat_id != params.chat_id:
            continue
        if event.dedup_key in seen:
            continue
        seen.add(event.dedup_key)
        projection.apply(event)
    return projection.xml()
