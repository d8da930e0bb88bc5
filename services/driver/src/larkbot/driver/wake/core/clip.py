"""Clipping of segments too large for the model (a 150 KB Feishu text, a long runtime output).

A segment whose estimate exceeds the chat's ``max_segment_est_tokens`` keeps its beginning (two thirds of
the allowance) and its end (one third: a question typed after a pasted log, the attachment lines), and a
``<clipped omitted-chars="N"/>`` marker stands where the middle was. The result is still well-formed XML:
cuts fall between tags and entities, never inside them; elements open at the first cut are closed before
the marker and those open at the second cut are re-opened after it, with their original opening tags.

Clipping depends only on the segment and the cap, so a clipped segment has the same bytes in every request
(the prompt prefix stays cacheable). It happens once, when a segment enters the driver's copy of the
context, so every reader (probe window, primary history, participation) sees the same clipped text.
"""

from __future__ import annotations

import re

from larkbot.canonical.context import Segment

from .estimate import CHARS_PER_TOKEN, IMAGE_TOKENS, segment_tokens

#: One markup token: a tag, an entity, or a run of text without either.
_TOKEN = re.compile(r"<[^>]*>|&[^;<>&]*;|[^<&]+")
#: Share of the allowance kept from the beginning; the rest is kept from the end.
HEAD_SHARE = 2 / 3


def _tag_name(tag: str) -> str:
    return re.split(r"[\s/>]", tag[1:].lstrip("/"), maxsplit=1)[0]


def _apply(stack: list[str], token: str) -> None:
    if token.startswith("</"):
        if stack:
            stack.pop()
    elif token.startswith("<") and not token.endswith("/>") and not token.startswith(("<?", "<!")):
        stack.append(token)


def _boundary(xml: str, limit: int, *, forward: bool) -> tuple[int, list[str]]:
    """The boundary nearest ``limit`` (at or before it, or at or after it when ``forward``) that lies
    between tokens or inside a text run, and the opening tags still open there."""
    stack: list[str] = []
    for match in _TOKEN.finditer(xml):
        start, end = match.span()
        token = match.group()
        if end > limit:
            if start >= limit or token[0] not in "<&":
                return (limit if start < limit else start), stack
            if not forward or token.startswith("</"):
                # A closing tag straddling a forward cut stays in the tail: skipping it would put the
                # marker outside the element it closes.
                return start, stack
            _apply(stack, token)
            return end, stack
        _apply(stack, token)
    return len(xml), stack


def clip_xml(xml: str, max_chars: int) -> str:
    """``xml`` itself when it fits in ``max_chars``, else its clipped form (see the module docstring)."""
    if len(xml) <= max_chars:
        return xml
    head_limit = int(max_chars * HEAD_SHARE)
    tail_limit = len(xml) - (max_chars - head_limit)
    # The marker always lands inside the outermost element: the head keeps at least its opening tag and
    # the tail at least its closing tag, however long they are.
    first = _TOKEN.match(xml)
    if first is not None and first.group().startswith("<") and not first.group().endswith("/>"):
        head_limit = max(head_limit, first.end())
    if xml.endswith(">") and (close := xml.rfind("</")) > 0:
        tail_limit = min(tail_limit, close)
    tail_limit = max(tail_limit, head_limit)
    head_end, head_open = _boundary(xml, head_limit, forward=False)
    tail_start, tail_open = _boundary(xml, tail_limit, forward=True)
    shared = 0
    while shared < min(len(head_open), len(tail_open)) and head_open[shared] == tail_open[shared]:
        shared += 1
    closes = "".join(f"</{_tag_name(tag)}>" for tag in reversed(head_open[shared:]))
    opens = "".join(tail_open[shared:])
    omitted = tail_start - head_end
    return f'{xml[:head_end]}{closes}<clipped omitted-chars="{omitted}"/>{opens}{xml[tail_start:]}'


def clip_segment(segment: Segment, max_tokens: int) -> Segment:
    """``segment`` with its XML clipped to ``max_tokens`` (images keep their flat cost and are kept)."""
    if segment_tokens(segment) <= max_tokens:
        return segment
    max_chars = max(1, max_tokens - IMAGE_TOKENS * len(segment.image_parts)) * CHARS_PER_TOKEN
    clipped = clip_xml(segment.xml, max_chars)
    return segment if clipped == segment.xml else segment.model_copy(update={"xml": clipped})
