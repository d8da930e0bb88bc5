"""What the fake LLM answers in end-to-end and fault-injection runs: a stateless rule keyed on markers in the
newest message of the chat, so that a repeated wake-up (after a crash) asks the same question and gets the
same answer. (The load run's model reads the same rendered messages: :func:`rendered_messages`.)

Markers in a member's message text:

- ``#send``: the probe says ``send_message``; the primary calls ``send_message`` with ``re <id> <token>``
  (``<id>`` the rendered id of that message, ``<token>`` the first word after the marker), so every
  reply names its trigger and a duplicated reply is visible at the platform.
- ``#react``: the probe says ``react_only``; the primary reacts 👍 to that message.
- ``#recall``: the probe says ``send_message``; the primary sends the reply with ``still_working``, then
  recalls it by the id ``send_message`` answered with (``sent (id <id>)``), then ends its turn.
- ``#readfile``: the probe says ``send_message``; the primary reads the message's first attachment with
  ``read_file``, then sends ``read <id> <first line of the text>`` (or the error it got).
- anything else: the probe says ``no_action``.

A primary request that already holds a participation call after the newest member message gets
``end_turn`` (the turn is over). A request without tools (a vision request for alt text) gets
:data:`ALT_TEXT`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from larkbot.canonical.llm import AssistantMessage, TextPart, ToolCallPart, ToolResultMessage, UserMessage
from larkbot.llm_gateway.fake import Action, FakeCall, Reply

ALT_TEXT = "a small red square on a white background"
_MESSAGE = re.compile(r'<message id="([^"]*)"([^>]*?)(?:/>|>(.*?)</message>)', re.DOTALL)
_MARK = re.compile(r"#(send|react|recall|readfile)\b\s*(\S*)")
_FILE_TEXT = re.compile(r"<file [^>]*>([^\n<]*)")
_SENT = re.compile(r"^sent \(id (\S+)\)$")


@dataclass(frozen=True, slots=True)
class Seen:
    """The newest message from a member (not the bot) in a request, and where it is."""

    rendered_id: str
    body: str
    index: int  # position of the request message holding it


@dataclass(frozen=True, slots=True)
class Rendered:
    """A ``<message>`` of a request's rendered context, and the request message holding it."""

    index: int
    rendered_id: str
    body: str
    myself: bool


def rendered_messages(call: FakeCall) -> Iterator[Rendered]:
    """Every rendered ``<message>`` of the request, in order (a deleted one has no body)."""
    for index, message in enumerate(call.request.messages):
        if isinstance(message, UserMessage | ToolResultMessage):
            text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
        else:
            continue
        for match in _MESSAGE.finditer(text):
            yield Rendered(index, match.group(1), match.group(3) or "", 'myself="true"' in match.group(2))


def newest_member_message(call: FakeCall) -> Seen | None:
    found: Seen | None = None
    for rendered in rendered_messages(call):
        if not rendered.myself:
            found = Seen(rendered.rendered_id, rendered.body, rendered.index)
    return found


def acted_after(call: FakeCall, index: int) -> bool:
    for message in call.request.messages[index + 1 :]:
        if isinstance(message, AssistantMessage) and any(
            isinstance(p, ToolCallPart) and p.name in ("send_message", "react") for p in message.parts
        ):
            return True
    return False


def tool_results_after(call: FakeCall, index: int) -> list[str]:
    return [
        "".join(p.text for p in message.parts if isinstance(p, TextPart))
        for message in call.request.messages[index + 1 :]
        if isinstance(message, ToolResultMessage)
    ]


def recall_step(call: FakeCall, seen: Seen, token: str) -> Action:
    """Send (turn kept open), recall what was sent by the id the send answered with, then end."""
    results = tool_results_after(call, seen.index)
    if "recalled" in results or "recall_message" not in {tool.name for tool in call.request.tools}:
        return Reply.tool_call("end_turn", {}, call_id="call_end")
    sent = next((m.group(1) for r in results if (m := _SENT.match(r))), None)
    if sent is not None:
        return Reply.tool_call("recall_message", {"message_id": sent}, call_id="call_recall")
    if acted_after(call, seen.index):
        return Reply.tool_call("end_turn", {}, call_id="call_end")
    text = reply_text(seen.rendered_id, token)
    return Reply.tool_call("send_message", {"text": text, "still_working": True}, call_id="call_send")


def read_file_step(call: FakeCall, seen: Seen) -> Action:
    """Read the message's first attachment, then tell the chat its first line (or the refusal)."""
    results = tool_results_after(call, seen.index)
    if acted_after(call, seen.index):
        return Reply.tool_call("end_turn", {}, call_id="call_end")
    if not results:
        args = {"file_id": f"{seen.rendered_id}:0"}
        return Reply.tool_call("read_file", args, call_id="call_read_file")
    found = _FILE_TEXT.search(results[0])
    told = found.group(1) if found is not None else results[0]
    return Reply.tool_call("send_message", {"text": f"read {seen.rendered_id} {told}"}, call_id="call_send")


def reply_text(rendered_id: str, token: str) -> str:
    return f"re {rendered_id} {token}".strip()


@dataclass
class BotScript:
    """The rule above, plus counters the tests read (calls by purpose)."""

    probes: list[FakeCall] = field(default_factory=list)
    primaries: list[FakeCall] = field(default_factory=list)
    visions: list[FakeCall] = field(default_factory=list)

    def __call__(self, call: FakeCall) -> Action:
        names = {tool.name for tool in call.request.tools}
        if not names:
            self.visions.append(call)
            return Reply.text(ALT_TEXT)
        seen = newest_member_message(call)
        mark = _MARK.search(seen.body) if seen is not None else None
        if "decide" in names:
            self.probes.append(call)
            decision = {
                "send": "send_message",
                "react": "react_only",
                "recall": "send_message",
                "readfile": "send_message",
            }.get(mark.group(1) if mark else "")
            return Reply.tool_call(
                "decide", {"should_act": decision or "no_action", "reason": "scripted"}, call_id="call_decide"
            )
        self.primaries.append(call)
        if seen is not None and mark is not None and mark.group(1) == "recall":
            return recall_step(call, seen, mark.group(2))
        if seen is not None and mark is not None and mark.group(1) == "readfile":
            return read_file_step(call, seen)
        if seen is None or mark is None or acted_after(call, seen.index):
            return Reply.tool_call("end_turn", {}, call_id="call_end")
        if mark.group(1) == "send" and "send_message" in names:
            text = reply_text(seen.rendered_id, mark.group(2))
            return Reply.tool_call("send_message", {"text": text}, call_id="call_send")
        if "react" in names:
            args = {"message_id": seen.rendered_id, "emoji": "👍"}
            return Reply.tool_call("react", args, call_id="call_react")
        return Reply.tool_call("end_turn", {}, call_id="call_end")

    def calls_mentioning(self, needle: str) -> tuple[int, int]:
        """(probe calls, primary calls) whose request text contains ``needle``."""
        return (
            sum(needle in call.raw.decode("utf-8", "replace") for call in self.probes),
            sum(needle in call.raw.decode("utf-8", "replace") for call in self.primaries),
        )
