"""The request log's core: a request cut into content-addressed blocks in the provider's caching order,
and the prefix two requests share."""

from __future__ import annotations

import hashlib

import pytest

from larkbot.canonical.llm import (
    AssistantMessage,
    ImagePart,
    LLMRequest,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from larkbot.driver.audit.core.requestlog import Block, SharedPrefix, blocks_of, shared_prefix

SEND = ToolSpec.of("send_message", "Send a message.", {"type": "object", "properties": {"text": {}}})


def _request(*messages: Message, tools: tuple[ToolSpec, ...] = (SEND,), system: str = "rules") -> LLMRequest:
    return LLMRequest(
        request_id="r1",
        purpose="primary",
        endpoint="primary",
        system=system,
        messages=messages,
        tools=tools,
        deadline_ms=1,
    )


def _user(*texts: str) -> UserMessage:
    return UserMessage(parts=tuple(TextPart(text=t) for t in texts))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


HISTORY = (
    _user('<message id="m1">hi</message>', '<message id="m2">there</message>'),
    AssistantMessage(
        parts=(
            ReasoningPart(text="they greet", format="anthropic-messages", model_identity="m"),
            TextPart(text="thinking aloud"),
            ToolCallPart(id="c0", name="send_message", arguments_json='{"text":"hello"}'),
        ),
        model_identity="m",
    ),
    ToolResultMessage(
        tool_call_id="c0", parts=(TextPart(text="sent (id m3)"), ImagePart(blob_key="b/1", mime="image/png"))
    ),
    UserMessage(
        parts=(
            TextPart(text="<late-binding>now</late-binding>"),
            ImagePart(blob_key="b/2", mime="image/jpeg", detail="low"),
        )
    ),
)


def test_a_request_is_cut_in_caching_order_one_block_per_part() -> None:
    blocks = blocks_of(_request(*HISTORY))
    assert [(b.kind, b.label, b.text) for b in blocks] == [
        (
            "tools",
            "tools",
            '[{"name":"send_message","description":"Send a message.",'
            '"parameters":{"type":"object","properties":{"text":{}}}}]',
        ),
        ("system", "system", "rules"),
        ("text", "user #1 part 1", '<message id="m1">hi</message>'),
        ("text", "user #1 part 2", '<message id="m2">there</message>'),
        ("reasoning", "assistant #2 reasoning", "they greet"),
        ("text", "assistant #2 text", "thinking aloud"),
        ("tool_call", "assistant #2 tool_call send_message", 'send_message({"text":"hello"}) [id c0]'),
        ("text", "tool_result #3 part 1 (send_message)", "sent (id m3)"),
        ("image", "tool_result #3 part 2 (send_message)", "[image b/1 image/png]"),
        ("text", "user #4 part 1", "<late-binding>now</late-binding>"),
        ("image", "user #4 part 2", "[image b/2 image/jpeg detail=low]"),
    ]
    for b in blocks:
        assert b.text is not None
        assert (b.sha256, b.chars) == (_sha(b.text), len(b.text))
    assert blocks_of(_request(*HISTORY)) == blocks  # deterministic


def test_opaque_payloads_are_never_kept_but_tell_payloads_apart() -> None:
    def assistant(opaque: str, extra: str | None = None) -> AssistantMessage:
        return AssistantMessage(
            parts=(ReasoningPart(opaque=opaque, format="responses", model_identity="m"),),
            model_identity="m",
            provider_extra=extra,
            provider_extra_format="responses" if extra else None,
        )

    one = blocks_of(_request(_user("q"), assistant("SECRET-A", '{"k":"SECRET-X"}')))
    two = blocks_of(_request(_user("q"), assistant("SECRET-B")))
    reasoning, extra = one[3], one[4]
    assert reasoning.label == "assistant #2 reasoning"
    assert reasoning.text == f"[reasoning: 8 chars opaque, sha256 {_sha('SECRET-A')[:12]}]"
    assert (extra.kind, extra.label) == ("provider_extra", "assistant #2 provider_extra")
    assert "SECRET" not in "".join(b.text or "" for b in one)
    assert reasoning.sha256 != two[3].sha256
    assert len(two) == 4


def test_a_tool_result_of_an_unknown_call_is_labelled_as_such() -> None:
    blocks = blocks_of(_request(ToolResultMessage(tool_call_id="gone", parts=(TextPart(text="x"),))))
    assert blocks[2].label == "tool_result #1 part 1 (?)"


def test_no_tools_is_still_one_block() -> None:
    blocks = blocks_of(_request(_user("q"), tools=()))
    assert (blocks[0].kind, blocks[0].text) == ("tools", "[]")


def _blocks(*texts: str | None, hidden: bool = False) -> tuple[Block, ...]:
    out = []
    for i, t in enumerate(texts):
        b = Block.of("text", f"user #1 part {i + 1}", t or "")
        out.append(Block(b.kind, b.label, b.sha256, b.chars, None if hidden else b.text))
    return tuple(out)


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        pytest.param(_blocks(), _blocks("abc"), SharedPrefix(0, 0), id="no previous"),
        pytest.param(_blocks("abc", "de"), _blocks("abc", "de"), SharedPrefix(2, 5), id="equal"),
        pytest.param(_blocks("abc", "de"), _blocks("abc", "de", "f"), SharedPrefix(2, 5), id="appended"),
        pytest.param(_blocks("abc", "de", "f"), _blocks("abc", "de"), SharedPrefix(2, 5), id="shortened"),
        pytest.param(
            _blocks("abc", "dex"), _blocks("abc", "dey", "z"), SharedPrefix(1, 5), id="within block"
        ),
        pytest.param(_blocks("xbc"), _blocks("abc"), SharedPrefix(0, 0), id="first differs"),
        pytest.param(
            _blocks("abc", "dex", hidden=True),
            _blocks("abc", "dey", hidden=True),
            SharedPrefix(1, 3),
            id="texts unknown: whole blocks only",
        ),
        pytest.param(
            _blocks("abc", "dex"), _blocks("abc", "dey", hidden=True), SharedPrefix(1, 3), id="one unknown"
        ),
    ],
)
def test_shared_prefix(
    previous: tuple[Block, ...], current: tuple[Block, ...], expected: SharedPrefix
) -> None:
    assert shared_prefix(previous, current) == expected


def test_consecutive_requests_share_all_but_the_late_binding() -> None:
    late = _user("<late-binding>1</late-binding>")
    first = blocks_of(_request(*HISTORY[:3], late))
    step = AssistantMessage(parts=(ToolCallPart(id="c1", name="send_message", arguments_json="{}"),))
    later = _user("<late-binding>2</late-binding>")
    second = blocks_of(_request(*HISTORY[:3], step, ToolResultMessage(tool_call_id="c1", parts=()), later))
    prefix = shared_prefix(first, second)
    assert prefix.blocks == len(first) - 1
    assert prefix.chars == sum(b.chars for b in first[:-1])
