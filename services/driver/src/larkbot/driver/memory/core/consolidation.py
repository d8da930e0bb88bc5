"""Memory consolidation (SPEC §7 maintenance): the ``normal`` memories of one person in one scope and
chat are merged by a model into fewer ``high`` ones. Pure: the request's text and the reading of the
answer; the adapter (``adapters.consolidator``) schedules, calls and stores.

Decisions:

- A group is ``(platform, person, scope, chat)``: memories of different chats or scopes are never merged,
  so a consolidation cannot move a fact into a chat where it was not usable.
- The answer is JSON: ``{"notes": [{"content": …, "covers": [ids]}]}``. A note must cover at least one
  memory of the batch; no memory may be covered twice; content is bounded. Anything else makes the whole
  answer invalid (nothing is written, the group backs off) — a half-read merge could disable a fact with
  no note standing for it.
- A merged note cites the union of the evidence of the memories it covers and supersedes them; the covered
  memories are disabled by patch, never deleted. Memories the model left uncovered stay as they are.
- Backoff: a failed group waits ``retry_initial`` doubling up to ``retry_max`` (per group: one person's
  failure never holds up another's).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from larkbot.canonical.llm import TextPart, UserMessage
from larkbot.driver.errors import InvalidAnswer
from larkbot.driver.wake.core.templates import CONSOLIDATION_RULES
from larkbot.runtime.backoff import Backoff

from .memory import Memory

#: The longest merged note (characters); the memory tools accept the same.
NOTE_MAX_CHARS = 500


@dataclass(frozen=True, slots=True)
class Note:
    content: str
    covers: tuple[int, ...]


def consolidation_system(name: str, platform: str, person: str) -> str:
    return CONSOLIDATION_RULES.format(name=name, platform=platform, person=person, max_chars=NOTE_MAX_CHARS)


def consolidation_message(batch: Sequence[Memory]) -> UserMessage:
    lines = [
        f'<note id="{m.id}" evidence="{escape(" ".join(m.evidence))}">{escape(m.content)}</note>'
        for m in batch
    ]
    return UserMessage(parts=(TextPart(text="<notes>\n" + "\n".join(lines) + "\n</notes>"),))


def _json_object(text: str) -> object:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise InvalidAnswer("no JSON object in the answer")
    try:
        return json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise InvalidAnswer(f"the answer is not valid JSON ({exc.msg})") from None


def read_notes(text: str, batch: Sequence[Memory]) -> tuple[Note, ...]:
    """The merged notes of an answer, or :class:`InvalidAnswer`."""
    data = _json_object(text)
    notes = data.get("notes") if isinstance(data, dict) else None
    if not isinstance(notes, list):
        raise InvalidAnswer('the answer has no "notes" list')
    ids = {m.id for m in batch}
    covered: set[int] = set()
    out: list[Note] = []
    for index, note in enumerate(notes):
        if not isinstance(note, dict):
            raise InvalidAnswer(f"note {index} is not an object")
        content, covers = note.get("content"), note.get("covers")
        if not isinstance(content, str) or not content.strip():
            raise InvalidAnswer(f"note {index} has no content")
        content = " ".join(content.split())
        if len(content) > NOTE_MAX_CHARS:
            raise InvalidAnswer(f"note {index} is longer than {NOTE_MAX_CHARS} characters")
        if (
            not isinstance(covers, list)
            or not covers
            or not all(isinstance(c, int) and not isinstance(c, bool) for c in covers)
        ):
            raise InvalidAnswer(f"note {index} covers no memory ids")
        unknown = [c for c in covers if c not in ids]
        if unknown:
            raise InvalidAnswer(f"note {index} covers ids that are not in the batch: {unknown[:5]}")
        twice = covered.intersection(covers)
        if twice or len(set(covers)) != len(covers):
            raise InvalidAnswer(f"note {index} covers ids already covered")
        covered.update(covers)
        out.append(Note(content, tuple(sorted(covers))))
    return tuple(out)


def merged_evidence(note: Note, batch: Sequence[Memory]) -> tuple[str, ...]:
    """The union of the covered memories' evidence, in the batch's order."""
    covers = set(note.covers)
    seen: dict[str, None] = {}
    for memory in batch:
        if memory.id in covers:
            for message_id in memory.evidence:
                seen.setdefault(message_id, None)
    return tuple(seen)


def backoff_ms(failures: int, initial_s: float, max_s: float) -> int:
    """The wait after the ``failures``-th consecutive failure (1-based): the runtime's schedule
    (:class:`larkbot.runtime.backoff.Backoff`), ``initial_s`` doubling to ``max_s``, without jitter."""
    return round(Backoff(initial_s, max_s, jitter=0.0).delay(failures, 0.0) * 1000)
