"""``make bench-load``'s members at the fake platforms: each planned act (:mod:`.load_traffic`) becomes
what the platform would deliver, and each bot reply that reaches a fake platform is matched to the
mention that asked for it.

Telegram acts are ``Update`` objects queued at the fake Bot API (its long poll hands them to the
ingress), built as the playground builds them (mention entities, photo sizes, ``edited_message``,
``message_reaction``). Feishu acts are schema-2.0 envelopes pushed over the fake's long connection, one
at a time per chat (the order a chat's events arrive in) and re-pushed, as Feishu does, until
acknowledged with 200. Photos are distinct JPEGs (``samples.photo``), so neither the thumbnail nor the
alt text comes from a cache.

A mention carries a ``#send <token>`` marker. The model (:class:`LoadModel`, answering at once) reads
the rendered context it is sent: a token some member asked with and no reply of the bot names yet is
pending; the probe acts when one is, and the primary replies ``re <token> …`` naming every pending one
(two mentions can meet in one wake-up). A turn's latency runs from the act's hand-over to the fake
platform until the first reply naming its token reaches it (both read from the same monotonic clock). A
mention recalled before it was answered (Feishu) is withdrawn: nobody waits for that answer.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from larkbot.canonical.llm import ToolResultMessage
from larkbot.cli import playground_updates as tg
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.ingress_telegram.fake import FakeBotApi
from larkbot.llm_gateway.fake import Action, FakeCall, Reply

from ..botscript import ALT_TEXT, rendered_messages
from ..ingress_feishu.pushing import push_until_accepted
from ..media import samples
from ..payloads import (
    feishu_image,
    feishu_mention,
    feishu_message_id,
    feishu_reaction,
    feishu_recall,
    feishu_text,
    feishu_user,
    telegram_chat,
)
from .load_traffic import MEMBERS, Act

__all__ = ["LoadModel", "Members", "feishu_chat_id", "telegram_chat_id"]

PUSH_TIMEOUT_S = 30.0
PHOTO_SIZE = (800, 600)
_TOKEN = r"q[tf]\d+x\d+"
_ASKED = re.compile(rf"#send ({_TOKEN})")
_REPLY = re.compile(rf"\bre ((?:{_TOKEN} ?)+)")
_FEISHU_EMOJI = ("THUMBSUP", "SMILE", "OK", "HEART", "APPLAUSE")
_TELEGRAM_EMOJI = ("👍", "❤", "🔥", "😁", "🎉")
_FEISHU_SENDS = frozenset({"message.create", "message.reply"})


def telegram_chat_id(chat: int) -> int:
    return -1003000000000 - chat


def feishu_chat_id(chat: int) -> str:
    return f"oc_load_{chat:04d}"


def _token(act: Act) -> str:
    return f"q{act.platform[0]}{act.chat}x{act.n}"


class Members:
    """Hands the acts to the fake platforms and keeps what a report needs: the acts by kind, each
    mention's hand-over time, each reply's latency."""

    def __init__(self, telegram: FakeBotApi, feishu: FakeFeishu) -> None:
        self.telegram = telegram
        self.feishu = feishu
        self.acts: Counter[str] = Counter()
        self.asked: dict[str, float] = {}
        self.answered: dict[str, float] = {}
        #: Latencies (seconds) of the replies found since :meth:`replies` was last asked.
        self.fresh: list[float] = []
        self.push_retries = 0
        #: Mentions recalled before they were answered.
        self.withdrawn = 0
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}  # Telegram: (chat, n) → message
        self._chat_locks: dict[int, asyncio.Lock] = {}
        self._reactions: Counter[tuple[str, int, int, int]] = Counter()
        self._pushes: set[asyncio.Task[None]] = set()
        self._seen_telegram = 0
        self._seen_feishu = 0
        for user in range(MEMBERS):
            feishu.users[feishu_user(user)] = f"Member {user}"

    @property
    def pushing(self) -> int:
        """Feishu events handed over and not yet acknowledged."""
        return len(self._pushes)

    def act(self, act: Act) -> None:
        self.acts[act.kind] += 1
        if act.kind == "mention":
            self.asked[_token(act)] = time.monotonic()
        if act.kind == "edit" and act.platform == "feishu":
            token = _token(act)
            if token in self.asked and token not in self.answered:
                del self.asked[token]
                self.withdrawn += 1
        if act.platform == "telegram":
            self._telegram(act)
        else:
            task = asyncio.create_task(self._feishu(act))
            self._pushes.add(task)
            task.add_done_callback(self._pushes.discard)

    async def settle(self) -> None:
        """Wait for the Feishu pushes in flight (each one re-pushed until acknowledged)."""
        while self._pushes:
            await asyncio.gather(*list(self._pushes))

    def replies(self) -> list[float]:
        """Latencies of the replies that reached the platforms since the last call."""
        for request in self.telegram.requests[self._seen_telegram :]:
            if request.method == "sendMessage":
                self._answer(str(request.params.get("text", "")), request.at)
        self._seen_telegram = len(self.telegram.requests)
        for recorded in self.feishu.requests[self._seen_feishu :]:
            if recorded.route in _FEISHU_SENDS:
                self._answer(recorded.body.decode("utf-8", "replace"), recorded.at)
        self._seen_feishu = len(self.feishu.requests)
        fresh, self.fresh = self.fresh, []
        return fresh

    def _answer(self, text: str, at: float) -> None:
        for reply in _REPLY.finditer(text):
            for token in reply.group(1).split():
                asked = self.asked.get(token)
                if asked is not None and token not in self.answered:
                    self.answered[token] = at
                    self.fresh.append(at - asked)

    def _emoji(self, act: Act, choices: tuple[str, ...]) -> str:
        """A reaction the member has not yet made to that message: a platform has no second copy of a
        reaction (the pipeline would dead-letter a repeat whose content differs, as a conflict)."""
        key = (act.platform, act.chat, act.n, act.user)
        made = self._reactions[key]
        self._reactions[key] += 1
        return choices[(act.n + made) % len(choices)]

    # -- Telegram -------------------------------------------------------------------------------------
    def _telegram(self, act: Act) -> None:
        chat_id = telegram_chat_id(act.chat)
        chat = telegram_chat(chat_id)
        user = tg.member_user(600_000 + act.user, f"Member {act.user}")
        now = int(time.time())
        message_id = 10_000 + act.n
        if act.kind == "reaction":
            emoji = self._emoji(act, _TELEGRAM_EMOJI)
            self.telegram.enqueue({"message_reaction": tg.reaction(chat, message_id, user, now, [], [emoji])})
            return
        if act.kind == "edit":
            previous = self._messages[(act.chat, act.n)]
            text = f"{previous.get('text') or previous.get('caption') or ''} (edited at {now})"
            changed = tg.edited(previous, text, now)
            self._messages[(act.chat, act.n)] = changed
            self.telegram.enqueue({"edited_message": changed})
            return
        photo = None
        text = _text(act)
        if act.kind == "mention":
            text = f"@{self.telegram.bot_username} {text}"
        if act.kind == "media":
            data = samples.photo(*PHOTO_SIZE, seed=act.chat * 100_000 + act.n)
            file_id = f"load_{chat_id}_{act.n}"
            self.telegram.add_file(file_id, data, f"photos/{file_id}.jpg")
            photo = tg.photo_sizes(file_id, f"u{file_id}", tg.image_info(data), len(data))
        message = tg.message(message_id, user, chat, now, text, photo=photo)
        self._messages[(act.chat, act.n)] = message
        self.telegram.enqueue({"message": message})

    # -- Feishu ---------------------------------------------------------------------------------------
    async def _feishu(self, act: Act) -> None:
        lock = self._chat_locks.setdefault(act.chat, asyncio.Lock())
        async with lock:
            await self._push(self._envelope(act))

    def _envelope(self, act: Act) -> dict[str, Any]:
        chat_id = feishu_chat_id(act.chat)
        sender = feishu_user(act.user)
        now = time.time_ns() // 1_000_000
        message_id = feishu_message_id(chat_id, act.n)
        if act.kind == "reaction":
            emoji = self._emoji(act, _FEISHU_EMOJI)
            return feishu_reaction(message_id, emoji, operator=sender, create_time_ms=now)
        if act.kind == "edit":
            return feishu_recall(chat_id, message_id, create_time_ms=now)
        self.feishu.message_chats[message_id] = chat_id
        if act.kind == "media":
            key = f"img_v3_load_{act.chat}_{act.n}"
            self.feishu.resources[key] = samples.photo(*PHOTO_SIZE, seed=-(act.chat * 100_000 + act.n))
            return feishu_image(chat_id, act.n, key, sender=sender, create_time_ms=now)
        if act.kind == "mention":
            return feishu_mention(
                chat_id,
                act.n,
                _text(act),
                sender=sender,
                create_time_ms=now,
                bot_open_id=self.feishu.bot_open_id,
                bot_name=self.feishu.bot_name,
            )
        return feishu_text(chat_id, act.n, _text(act), sender=sender, create_time_ms=now)

    async def _push(self, envelope: dict[str, Any]) -> None:
        self.push_retries += await push_until_accepted(self.feishu, envelope, PUSH_TIMEOUT_S)


def _text(act: Act) -> str:
    if act.kind == "mention":
        return f"#send {_token(act)} what do you make of this, number {act.n}?"
    if act.kind == "media":
        return ""
    return f"message {act.n} from member {act.user}: nothing for the bot here"


@dataclass
class LoadModel:
    """The fake model of the load run (a script of :class:`~larkbot.llm_gateway.fake.FakeProvider`):
    answers every pending mention, describes every image; counts its calls by purpose."""

    calls: Counter[str] = field(default_factory=Counter)

    def __call__(self, call: FakeCall) -> Action:
        names = {tool.name for tool in call.request.tools}
        if not names:
            self.calls["vision"] += 1
            return Reply.text(ALT_TEXT)
        pending = _pending(call)
        if "decide" in names:
            self.calls["probe"] += 1
            decision = "send_message" if pending else "no_action"
            return Reply.tool_call("decide", {"should_act": decision, "reason": "load"}, call_id="d")
        self.calls["primary"] += 1
        if (
            pending
            and "send_message" in names
            and not isinstance(call.request.messages[-1], ToolResultMessage)
        ):
            return Reply.tool_call("send_message", {"text": "re " + " ".join(pending)}, call_id="s")
        return Reply.tool_call("end_turn", {}, call_id="e")


def _pending(call: FakeCall) -> list[str]:
    """Tokens asked in the rendered context that no reply of the bot in it names, in order."""
    asked: list[str] = []
    answered: set[str] = set()
    for message in rendered_messages(call):
        if message.myself:
            for reply in _REPLY.finditer(message.body):
                answered.update(reply.group(1).split())
        else:
            asked.extend(_ASKED.findall(message.body))
    return [token for token in dict.fromkeys(asked) if token not in answered]
