"""Late binding of memories (SPEC §7): the high-importance memories of the people in the conversation,
rendered as a ``<memory>`` block of the late-binding message — never in the cached prefix, so what is
remembered can change without breaking the prompt cache, and the system prompt's bytes never depend on it.

Decisions:

- The people are the human senders of the messages shown to the model (not the bot, not other bots, not
  deleted messages), most recent speaker first: when the bounds cut, the people talking now keep theirs.
- Each line carries the person's uid (never only a name: names change and can be copied), the memory's
  id (for ``memory_patch``) and the content, XML-escaped.
- The kept memories are rendered in a stable order — by uid, then memory id — so the block's bytes do not
  change when the same people merely speak in another order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from larkbot.canonical.context import Segment

from .memory import Memory


@dataclass(frozen=True, slots=True)
class RecallLimits:
    """Bounds of the ``<memory>`` block (``ChatSettings.memory_late_binding_max`` / ``…_max_chars``)."""

    max_count: int
    max_chars: int


def people_in(segments: Iterable[Segment]) -> tuple[str, ...]:
    """Human senders of the shown messages, most recent first, each once."""
    order: dict[str, int] = {}
    for index, s in enumerate(segments):
        if (
            s.node_type != "message"
            or s.sender_id is None
            or s.is_myself
            or s.is_self_sent
            or s.is_bot
            or s.is_deleted
        ):
            continue
        order[s.sender_id] = index
    return tuple(sorted(order, key=lambda person: (-order[person], person)))


def memory_line(memory: Memory) -> str:
    return f'<fact id="{memory.id}" uid={quoteattr(memory.person_id)}>{escape(memory.content)}</fact>'


def memory_block(memories: Sequence[Memory], limits: RecallLimits) -> str | None:
    """The block for ``memories`` (in relevance order: the store's order for the people given), or
    ``None`` when there is nothing to show. Lines that would pass a bound are left out."""
    kept: list[Memory] = []
    used = 0
    for memory in memories:
        if len(kept) >= limits.max_count:
            break
        size = len(memory_line(memory)) + 1
        if used + size > limits.max_chars:
            continue
        kept.append(memory)
        used += size
    if not kept:
        return None
    kept.sort(key=lambda m: (m.person_id, m.id))
    body = "\n".join(memory_line(m) for m in kept)
    return f"<memory>\n{body}\n</memory>"
