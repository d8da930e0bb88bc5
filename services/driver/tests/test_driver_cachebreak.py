"""The cache-break watch's core: a primary request that extends the previous one (all but its late-binding
message) is intact; any other names the first block the cache cannot serve and one cause."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from larkbot.canonical.llm import (
    AssistantMessage,
    LLMRequest,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from larkbot.driver.audit.core.cachebreak import CAUSES, EXPECTED, CacheBreak, PromptShape, cache_break
from larkbot.driver.audit.core.requestlog import Block, blocks_of

SEND = ToolSpec.of("send_message", "Send a message.", {"type": "object", "properties": {"text": {}}})
REACT = ToolSpec.of("react", "React to a message.", {"type": "object", "properties": {"emoji": {}}})
SEND_REWORDED = ToolSpec.of("send_message", "Send a text.", {"type": "object", "properties": {"text": {}}})


def _user(*texts: str) -> UserMessage:
    return UserMessage(parts=tuple(TextPart(text=t) for t in texts))


def _late(n: int) -> UserMessage:
    return _user(f"<late-binding>now={n}</late-binding>")


M1 = '<message id="m1">hi</message>'
M2 = '<message id="m2">there</message>'
M3 = '<message id="m3">anyone?</message>'
SUMMARY = _user("<summary>\nthey said hi\n</summary>")
OMITTED_40 = _user('<omitted messages="40"/>')
OMITTED_80 = _user('<omitted messages="80"/>')


def _turn(text: str, *, reasoning: bool = False) -> tuple[Message, ...]:
    parts: list[ReasoningPart | TextPart | ToolCallPart] = []
    if reasoning:
        parts.append(ReasoningPart(text="they greet", format="anthropic-messages", model_identity="m"))
    parts.append(ToolCallPart(id=f"c-{text}", name="send_message", arguments_json=f'{{"text":"{text}"}}'))
    return (
        AssistantMessage(parts=tuple(parts), model_identity="m"),
        ToolResultMessage(tool_call_id=f"c-{text}", parts=(TextPart(text="sent"),)),
    )


BASE: tuple[Message, ...] = (_user(M1, M2), *_turn("hello"))


@dataclass(frozen=True)
class Req:
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = (SEND, REACT)
    system: str = "rules"
    endpoint: str = "primary"
    summary_cursor: int | None = None
    late: int = 1
    texts: bool = field(default=True)

    def blocks(self) -> tuple[Block, ...]:
        request = LLMRequest(
            request_id="r",
            purpose="primary",
            endpoint=self.endpoint,
            system=self.system,
            messages=(*self.messages, _late(self.late)),
            tools=self.tools,
            deadline_ms=1,
        )
        blocks = blocks_of(request)
        if self.texts:
            return blocks
        return tuple(Block(b.kind, b.label, b.sha256, b.chars, None) for b in blocks)


def _shape(r: Req) -> PromptShape:
    return PromptShape.of(r.blocks(), r.endpoint, r.summary_cursor)


def _break(before: Req, after: Req) -> CacheBreak | None:
    return cache_break(_shape(before), after.blocks(), after.endpoint, after.summary_cursor)


CASES: list[tuple[str, Req, Req, tuple[str, int, str] | None]] = [
    ("same request again, new late-binding", Req(BASE), Req(BASE, late=2), None),
    ("new segments appended to the last member message", Req(BASE), Req((*BASE, _user(M3)), late=2), None),
    (
        "the next step of the tool loop",
        Req((_user(M1, M2),)),
        Req((_user(M1, M2), *_turn("hello")), late=2),
        None,
    ),
    (
        "a new part appended to the open member message",
        Req((_user(M1),)),
        Req((_user(M1, M2),), late=2),
        None,
    ),
    ("the model switched", Req(BASE), Req(BASE, endpoint="other", late=2), ("model", 0, "tools")),
    ("a wrap-up step offers fewer tools", Req(BASE), Req(BASE, tools=(SEND,)), ("tool_offer", 0, "tools")),
    (
        "a tool's definition changed",
        Req(BASE),
        Req(BASE, tools=(SEND_REWORDED, REACT)),
        ("tools", 0, "tools"),
    ),
    (
        "tools changed, texts not stored",
        Req(BASE, texts=False),
        Req(BASE, tools=(SEND,), texts=False),
        ("tools", 0, "tools"),
    ),
    ("the system prompt changed", Req(BASE), Req(BASE, system="new rules"), ("system", 1, "system")),
    (
        "a compaction moved the cursor",
        Req(BASE),
        Req((SUMMARY, _user(M3)), summary_cursor=7, late=2),
        ("compaction", 2, "user #1 part 1"),
    ),
    (
        "a second compaction replaced the summary",
        Req((SUMMARY, *BASE), summary_cursor=7),
        Req((_user("<summary>\nnewer\n</summary>"),), summary_cursor=9),
        ("compaction", 2, "user #1 part 1"),
    ),
    (
        "a trimmed history's start moved",
        Req((OMITTED_40, *BASE)),
        Req((OMITTED_80, _user(M3)), late=2),
        ("trimmed", 2, "user #1 part 1"),
    ),
    (
        "an old turn's reasoning aged out of the replay",
        Req((_user(M1), *_turn("hello", reasoning=True), _user(M2))),
        Req((_user(M1), *_turn("hello"), _user(M2)), late=2),
        ("reasoning", 3, "assistant #2 tool_call send_message"),
    ),
    (
        "an old message edited",
        Req(BASE),
        Req((_user(M1, '<message id="m2" edited="true">there!</message>'), *BASE[1:]), late=2),
        ("history", 3, "user #1 part 2"),
    ),
    (
        "an old message deleted",
        Req((_user(M1, M2), *_turn("hello"), _user(M3))),
        Req((_user(M1), *_turn("hello"), _user(M3)), late=2),
        ("history", 3, "assistant #2 tool_call send_message"),
    ),
    (
        "the bot's own stored turn rewritten",
        Req(BASE),
        Req((_user(M1, M2), *_turn("hi again")), late=2),
        ("unexplained", 4, "assistant #2 tool_call send_message"),
    ),
]


@pytest.mark.parametrize(("name", "before", "after", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_request_extends_the_previous_one_or_names_its_break(
    name: str, before: Req, after: Req, expected: tuple[str, int, str] | None
) -> None:
    found = _break(before, after)
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert (found.cause, found.index, found.label) == expected
        assert found.kind == after.blocks()[found.index].kind


def test_only_the_causes_the_design_accounts_for_are_expected() -> None:
    assert set(CAUSES) > EXPECTED
    assert {c for c in CAUSES if CacheBreak(c, 0, "tools", "tools").expected} == {
        "tool_offer",
        "compaction",
        "trimmed",
        "reasoning",
        "history",
    }


def test_a_request_shorter_than_the_previous_cacheable_part_names_the_missing_block() -> None:
    before = Req((_user(M1, M2), *_turn("hello")))
    after = before.blocks()[:3]  # tools, system, the first member part: everything else is gone
    found = cache_break(_shape(before), after, "primary", None)
    assert found == CacheBreak("history", 3, "user (missing)", "text")


def test_what_is_kept_of_a_request_is_a_fixed_few_bytes_per_block() -> None:
    shape = _shape(Req((*BASE, _user(M3 * 1000))))
    # tools, system, 2 member parts, the tool call, its result, the long segment; not the late-binding.
    assert len(shape.kinds) == 7
    assert len(shape.digests) == 7 * 8
    assert shape.roles == ("tools", "system", "user", "user", "assistant", "tool_result", "user")
    assert shape.tool_names == ("send_message", "react")
