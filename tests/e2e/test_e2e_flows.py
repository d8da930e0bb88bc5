"""A member's message travels the whole system and the bot answers — or stays silent, or reacts.

ingress → EVENTS → pipeline → CONTEXT → driver → llm.generate → gateway → fake LLM → driver →
actions.<platform> → ingress → fake platform, and the self-sent event back through the pipeline into the
rendered context. Every service is a real process; only the platforms and the model are fakes. An image
waits for the media service (thumbnail, alt text from the vision endpoint) before it enters the context.
"""

from __future__ import annotations

import io
import json
import time

from PIL import Image
from tests.harness.world import World

from larkbot.canonical.actions import DeleteMessageAction, ReactAction, SendMessageAction
from larkbot.canonical.aliases import alias_for
from larkbot.canonical.names import Platform
from larkbot.ingress_feishu.fake.samples import payload
from larkbot.testkit.botscript import ALT_TEXT, BotScript
from larkbot.testkit.media import documents, samples
from larkbot.testkit.payloads import (
    feishu_image,
    feishu_message_id,
    feishu_text,
    telegram_chat,
    telegram_text,
    telegram_user,
)
from larkbot.testkit.stack import until

from .conftest import FEISHU_CHATS, MEMBER, TELEGRAM_CHATS

REPLY, SILENT, REACT, _IMAGE, LONG, RECALL = FEISHU_CHATS
TG_REPLY, TG_SILENT, TG_REACT, TG_RECALL, TG_MOVING, TG_EMOJI = TELEGRAM_CHATS


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def push(w: World, envelope: dict[str, object]) -> None:
    assert await w.feishu.long_connection.push(envelope) == 200


async def test_feishu_message_gets_exactly_one_reply_and_the_self_event_enters_the_context(
    e2e: tuple[World, BotScript],
) -> None:
    w, script = e2e
    await push(
        w, feishu_text(REPLY, 1, "#send tokfeishu what is up?", sender=MEMBER, create_time_ms=now_ms())
    )

    await until(
        lambda: any(s.chat_id == REPLY for s in w.feishu.sent.values()), "the reply at the fake Feishu"
    )
    sent = [s for s in w.feishu.sent.values() if s.chat_id == REPLY]
    assert len(sent) == 1
    # The reply went out with the driver's idempotency key as Feishu's uuid.
    actions = w.tap.of_kind("send_message", REPLY)
    assert len(actions) == 1
    assert isinstance(actions[0], SendMessageAction)
    assert sent[0].uuid == actions[0].idempotency_key
    assert "tokfeishu" in sent[0].content
    assert len([r for r in w.feishu.routed("message.create") + w.feishu.routed("message.reply")]) >= 1

    async def self_event_in_context() -> bool:
        snap = await w.snapshot(Platform.FEISHU, REPLY)
        return any(seg.message_id == sent[0].message_id for seg in snap.segments)

    await until(self_event_in_context, "the self-sent event in the rendered context")
    snap = await w.snapshot(Platform.FEISHU, REPLY)
    mine = [seg for seg in snap.segments if seg.message_id == sent[0].message_id]
    assert len(mine) == 1
    assert mine[0].is_myself
    assert mine[0].is_self_sent
    assert "tokfeishu" in mine[0].xml
    member = [seg for seg in snap.segments if seg.message_id == feishu_message_id(REPLY, 1)]
    assert len(member) == 1
    assert not member[0].is_myself
    # One probe, one primary: the self-event did not wake the bot again.
    assert script.calls_mentioning("tokfeishu what") == (1, 1)
    assert len([s for s in w.feishu.sent.values() if s.chat_id == REPLY]) == 1
    rows = await w.event_rows("feishu", REPLY)
    assert [r.message_id for r in rows] == [feishu_message_id(REPLY, 1), sent[0].message_id]


async def test_telegram_message_gets_exactly_one_reply_and_the_self_event_enters_the_context(
    e2e: tuple[World, BotScript],
) -> None:
    w, script = e2e
    w.telegram.enqueue(telegram_text(TG_REPLY, 11, "#send toktg hello bot", user=1, date=now_ms() // 1000))

    await until(
        lambda: any(m["chat"]["id"] == TG_REPLY for m in w.telegram.sent), "the reply at the fake Bot API"
    )
    sent = [m for m in w.telegram.sent if m["chat"]["id"] == TG_REPLY]
    assert len(sent) == 1
    assert "toktg" in sent[0]["text"]
    actions = w.tap.of_kind("send_message", str(TG_REPLY))
    assert len(actions) == 1
    bot_message_id = str(sent[0]["message_id"])

    async def self_event_in_context() -> bool:
        snap = await w.snapshot(Platform.TELEGRAM, str(TG_REPLY))
        return any(seg.message_id == bot_message_id and seg.is_myself for seg in snap.segments)

    await until(self_event_in_context, "the self-sent event in the rendered context")
    snap = await w.snapshot(Platform.TELEGRAM, str(TG_REPLY))
    assert [seg.message_id for seg in snap.segments] == ["11", bot_message_id]
    assert snap.segments[1].is_self_sent
    assert script.calls_mentioning("toktg hello") == (1, 1)
    assert len([m for m in w.telegram.sent if m["chat"]["id"] == TG_REPLY]) == 1


async def test_silent_decision_sends_nothing(e2e: tuple[World, BotScript]) -> None:
    w, script = e2e
    before = await w.metric("driver", "larkbot_driver_probe_decisions_total", outcome="no_action")
    await push(w, feishu_text(SILENT, 1, "toksilentf just chatting", sender=MEMBER, create_time_ms=now_ms()))
    w.telegram.enqueue(
        telegram_text(TG_SILENT, 21, "toksilentt just chatting", user=2, date=now_ms() // 1000)
    )

    async def both_decided() -> bool:
        after = await w.metric("driver", "larkbot_driver_probe_decisions_total", outcome="no_action")
        return after >= before + 2

    await until(both_decided, "two no_action probe decisions")
    assert script.calls_mentioning("toksilentf") == (1, 0)
    assert script.calls_mentioning("toksilentt") == (1, 0)
    assert not [s for s in w.feishu.sent.values() if s.chat_id == SILENT]
    assert not [m for m in w.telegram.sent if m["chat"]["id"] == TG_SILENT]
    assert not w.tap.of_kind("send_message", SILENT)
    assert not w.tap.of_kind("react", SILENT)
    snap = await w.snapshot(Platform.FEISHU, SILENT)
    assert [seg.message_id for seg in snap.segments] == [feishu_message_id(SILENT, 1)]


async def test_react_only_decision_reacts(e2e: tuple[World, BotScript]) -> None:
    w, script = e2e
    target = feishu_message_id(REACT, 1)
    w.feishu.message_chats[target] = REACT
    await push(w, feishu_text(REACT, 1, "#react tokreactf nice work", sender=MEMBER, create_time_ms=now_ms()))
    w.telegram.enqueue(
        telegram_text(TG_REACT, 31, "#react tokreactt nice work", user=3, date=now_ms() // 1000)
    )

    await until(lambda: any(m == target for m, _, _ in w.feishu.reactions.values()), "the Feishu reaction")
    await until(lambda: (TG_REACT, 31) in w.telegram.reactions, "the Telegram reaction")
    assert [(m, e) for m, e, _ in w.feishu.reactions.values() if m == target] == [(target, "THUMBSUP")]
    assert w.telegram.reactions[(TG_REACT, 31)] == [{"type": "emoji", "emoji": "👍"}]
    reacts = w.tap.of_kind("react", REACT)
    assert len(reacts) == 1
    assert isinstance(reacts[0], ReactAction)
    assert reacts[0].message_id == target  # the alias the model wrote was resolved to the platform id
    # react_only: the primary was offered only react and end_turn, and nothing was sent.
    primaries = [c for c in script.primaries if "tokreactf" in c.raw.decode()]
    assert len(primaries) == 1
    assert {t.name for t in primaries[0].request.tools} == {"react", "end_turn"}
    assert not [s for s in w.feishu.sent.values() if s.chat_id == REACT]
    assert not [m for m in w.telegram.sent if m["chat"]["id"] == TG_REACT]
    body = json.loads(primaries[0].raw)
    assert body["model"] == "fake-primary"


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (220, 20, 20)).save(out, format="PNG")
    return out.getvalue()


async def test_image_waits_for_media_and_its_alt_text_enters_the_context(
    e2e: tuple[World, BotScript],
) -> None:
    w, _script = e2e
    key = "img_v3_e2e_red_square"
    w.feishu.resources[key] = png()
    w.feishu.message_chats[feishu_message_id(_IMAGE, 1)] = _IMAGE
    envelope = feishu_image(_IMAGE, 1, key, sender=MEMBER, create_time_ms=time.time_ns() // 1_000_000)
    assert await w.feishu.long_connection.push(envelope) == 200
    message_id = feishu_message_id(_IMAGE, 1)

    async def alt_text_rendered() -> bool:
        snap = await w.snapshot(Platform.FEISHU, _IMAGE)
        return any(s.message_id == message_id and ALT_TEXT in s.xml for s in snap.segments)

    await until(alt_text_rendered, "the image's alt text in the rendered context", timeout_s=180)
    snap = await w.snapshot(Platform.FEISHU, _IMAGE)
    image = [s for s in snap.segments if s.message_id == message_id]
    assert len(image) == 1
    assert "<image" in image[0].xml
    assert not image[0].image_parts  # alt text replaces the thumbnail


def _telegram_media(message_id: int, kind: str, media: dict[str, object]) -> dict[str, object]:
    message: dict[str, object] = {
        "message_id": message_id,
        "from": telegram_user(5),
        "chat": telegram_chat(TG_MOVING),
        "date": now_ms() // 1000,
        kind: media,
    }
    if kind == "animation":
        message["document"] = media  # Telegram sends an animation as a document too
    return {"message": message}


async def test_videos_animations_and_stickers_wait_for_their_frames_and_enter_described(
    e2e: tuple[World, BotScript],
) -> None:
    """Telegram's moving media through the real media worker: the ingress downloads each file from the fake
    Bot API, the worker picks frames (PyAV for MP4/WebM, rlottie for TGS) and the vision endpoint's
    description is what the rendered context shows."""
    w, _script = e2e
    clip = samples.mp4([(255, 0, 0), (0, 255, 0), (0, 0, 255)])
    files = {
        "vid_e2e": ("videos/file_1.mp4", clip),
        "gif_e2e": ("animations/file_2.mp4", clip),
        "webm_e2e": ("stickers/file_3.webm", samples.webm_sticker()),
        "tgs_e2e": ("stickers/file_4.tgs", samples.tgs_of(samples.lottie_square())),
    }
    for file_id, (path, data) in files.items():
        w.telegram.add_file(file_id, data, path)

    def media(file_id: str, **fields: object) -> dict[str, object]:
        return {
            "file_id": file_id,
            "file_unique_id": f"u_{file_id}",
            "file_size": len(files[file_id][1]),
            **fields,
        }

    sticker = {"width": 64, "height": 64, "type": "regular", "emoji": "😺"}
    updates = [
        _telegram_media(
            51, "video", media("vid_e2e", width=64, height=48, duration=1, mime_type="video/mp4")
        ),
        _telegram_media(
            52, "animation", media("gif_e2e", width=64, height=48, duration=1, mime_type="video/mp4")
        ),
        _telegram_media(53, "sticker", media("webm_e2e", is_animated=False, is_video=True, **sticker)),
        _telegram_media(54, "sticker", media("tgs_e2e", is_animated=True, is_video=False, **sticker)),
    ]
    for update in updates:
        w.telegram.enqueue(update)

    async def all_described() -> bool:
        snap = await w.snapshot(Platform.TELEGRAM, str(TG_MOVING))
        return sum(ALT_TEXT in s.xml for s in snap.segments) == 4

    await until(all_described, "four descriptions in the rendered context", timeout_s=180)
    snap = await w.snapshot(Platform.TELEGRAM, str(TG_MOVING))
    xml = "".join(s.xml for s in snap.segments)
    assert (
        f'<attachment type="video" mime="video/mp4" size="64x48" duration="1s" file-id="51:0">{ALT_TEXT}<'
        in xml
    )
    assert f'<animation mime="video/mp4" size="64x48" duration="1s" file-id="52:0">{ALT_TEXT}<' in xml
    assert f'<sticker mime="video/webm" size="64x64" file-id="53:0">{ALT_TEXT}<' in xml
    assert f'<sticker mime="application/x-tgsticker" size="64x64" file-id="54:0">{ALT_TEXT}<' in xml
    assert all(not s.image_parts for s in snap.segments)  # the descriptions replace the frames


async def test_custom_emoji_and_sticker_sets_enter_described_and_an_emoji_is_described_once(
    e2e: tuple[World, BotScript],
) -> None:
    """A Telegram custom emoji through the real services: the media worker asks ingress-telegram for the
    emoji's sticker (getCustomEmojiStickers on the fake Bot API), downloads it and has it described; the
    rendered context shows the description with the sticker set. The same emoji in a later message is
    answered from the worker's cache: no second lookup, download or description. A sticker message shows
    its set as ``pack``."""
    w, script = e2e
    emoji_id = "5368324170671202286"
    w.telegram.add_custom_emoji(
        emoji_id, samples.solid((250, 200, 0), (100, 100), fmt="WEBP"), emoji="🦆", set_name="DuckEmoji"
    )
    w.telegram.add_file("cat_e2e", samples.solid((120, 120, 120), (64, 64), fmt="WEBP"), "stickers/cat.webp")

    def with_emoji(message_id: int) -> dict[str, object]:
        update = telegram_text(TG_EMOJI, message_id, "hi 🦆 there", user=6, date=now_ms() // 1000)
        entity = {"type": "custom_emoji", "offset": 3, "length": 2, "custom_emoji_id": emoji_id}
        update["message"]["entities"] = [entity]  # type: ignore[index]
        return update

    sticker = {"file_id": "cat_e2e", "file_unique_id": "u_cat", "width": 64, "height": 64, "type": "regular",
               "is_animated": False, "is_video": False, "emoji": "😺", "set_name": "CatPack"}  # fmt: skip
    w.telegram.enqueue(with_emoji(61))
    w.telegram.enqueue(
        {
            "message": {
                "message_id": 62,
                "from": telegram_user(6),
                "chat": telegram_chat(TG_EMOJI),
                "date": now_ms() // 1000,
                "sticker": sticker,
            }
        }
    )
    described = f'<custom-emoji pack="DuckEmoji">{ALT_TEXT}</custom-emoji>'

    async def rendered(message_id: str, text: str) -> bool:
        snap = await w.snapshot(Platform.TELEGRAM, str(TG_EMOJI))
        return any(s.message_id == message_id and text in s.xml for s in snap.segments)

    await until(lambda: rendered("61", described), "the custom emoji's description", timeout_s=180)
    await until(lambda: rendered("62", ALT_TEXT), "the sticker's description", timeout_s=180)
    snap = await w.snapshot(Platform.TELEGRAM, str(TG_EMOJI))
    first = next(s for s in snap.segments if s.message_id == "61")
    assert f"hi {described} there" in first.xml
    second = next(s for s in snap.segments if s.message_id == "62")
    assert f'<sticker mime="image/webp" size="64x64" pack="CatPack" file-id="62:0">{ALT_TEXT}<' in second.xml
    assert len(w.telegram.calls("getCustomEmojiStickers")) == 1

    visions, downloads = len(script.visions), len(w.telegram.calls("getFile"))
    w.telegram.enqueue(with_emoji(63))
    await until(lambda: rendered("63", described), "the emoji again, from the cache", timeout_s=180)
    assert len(script.visions) == visions
    assert len(w.telegram.calls("getCustomEmojiStickers")) == 1
    assert len(w.telegram.calls("getFile")) == downloads


async def test_a_feishu_video_waits_for_its_frames_and_enters_described(e2e: tuple[World, BotScript]) -> None:
    """A Feishu ``media`` message: ingress-feishu downloads the video through the message resource API
    (``type=file``), the worker takes its frames, and the description is what the context shows."""
    w, _script = e2e
    key = "file_v3_e2e_video"
    w.feishu.resources[key] = samples.mp4([(255, 0, 0), (0, 0, 255)])
    message_id = feishu_message_id(_IMAGE, 2)
    w.feishu.message_chats[message_id] = _IMAGE
    envelope = feishu_image(_IMAGE, 2, "unused", sender=MEMBER, create_time_ms=now_ms())
    message = envelope["event"]["message"]  # type: ignore[index]
    message["message_type"] = "media"
    message["content"] = json.dumps({"file_key": key, "image_key": "img_cover", "file_name": "demo.mp4",
                                     "duration": 1000})  # fmt: skip
    await push(w, envelope)

    async def described() -> bool:
        snap = await w.snapshot(Platform.FEISHU, _IMAGE)
        return any(s.message_id == message_id and ALT_TEXT in s.xml for s in snap.segments)

    await until(described, "the Feishu video's description", timeout_s=180)
    snap = await w.snapshot(Platform.FEISHU, _IMAGE)
    (video,) = [s for s in snap.segments if s.message_id == message_id]
    shown = alias_for(_IMAGE, message_id)
    assert (
        f'<attachment type="video" name="demo.mp4" duration="1s" file-id="{shown}:0">{ALT_TEXT}<' in video.xml
    )
    downloads = [r for r in w.feishu.routed("message.resource") if key in r.path]
    assert downloads
    assert all(r.query.get("type") == "file" for r in downloads)


async def test_read_file_gives_the_model_the_text_of_a_pdf_sent_as_a_document(
    e2e: tuple[World, BotScript],
) -> None:
    """A Telegram document (a PDF made here): the model calls ``read_file``, the driver asks the real media
    worker, which downloads it through ingress-telegram and extracts its text; the model's reply quotes
    its first line. Asked again, the worker answers from its extract cache without downloading."""
    w, _script = e2e
    report = documents.pdf([["Quarterly report: revenue grew 12 %", "EMEA led."], ["Outlook steady."]])
    w.telegram.add_file("doc_e2e", report, "documents/report.pdf")
    document = {"file_id": "doc_e2e", "file_unique_id": "u_doc", "file_name": "report.pdf",
                "mime_type": "application/pdf", "file_size": len(report)}  # fmt: skip
    chat = telegram_chat(TG_EMOJI)

    def update(message_id: int) -> dict[str, object]:
        message = {"message_id": message_id, "from": telegram_user(7), "chat": chat,
                   "date": now_ms() // 1000, "document": document, "caption": "#readfile"}  # fmt: skip
        return {"message": message}

    def replies(message_id: int) -> list[str]:
        return [m["text"] for m in w.telegram.sent if m["text"].startswith(f"read {message_id} ")]

    w.telegram.enqueue(update(71))
    await until(lambda: bool(replies(71)), "the bot's reply quoting the PDF", timeout_s=180)
    assert replies(71) == ["read 71 Quarterly report: revenue grew 12 %"]
    downloads = len(w.telegram.calls("getFile"))
    w.telegram.enqueue(update(72))
    await until(lambda: bool(replies(72)), "the second reply, from the cache", timeout_s=180)
    assert replies(72) == ["read 72 Quarterly report: revenue grew 12 %"]
    assert len(w.telegram.calls("getFile")) == downloads


async def test_a_120_kb_feishu_text_mentioning_the_bot_gets_a_reply(e2e: tuple[World, BotScript]) -> None:
    """Regression: a message larger than the probe window crashed the wake-up (IndexError) and the bot
    never answered. It is clipped for the model, with a marker, and answered like any other."""
    w, script = e2e
    filler = "".join(f"line {i:05d}: the build log goes on and on\n" for i in range(3000))
    text = f"@_user_1 #send toklong please read this {filler}so what broke?"
    assert len(text.encode()) >= 120_000
    envelope = feishu_text(LONG, 1, text, sender=MEMBER, create_time_ms=now_ms())
    bot_mention = payload("message_text")["event"]["message"]["mentions"][0]
    assert bot_mention["id"]["open_id"] == w.feishu.bot_open_id
    envelope["event"]["message"]["mentions"] = [bot_mention]
    await push(w, envelope)

    await until(lambda: any(s.chat_id == LONG for s in w.feishu.sent.values()), "the reply to the long text")
    sent = [s for s in w.feishu.sent.values() if s.chat_id == LONG]
    assert len(sent) == 1
    assert "toklong" in sent[0].content
    probes, primaries = script.calls_mentioning("toklong")
    assert (probes, primaries) == (1, 1)
    primary = next(c for c in script.primaries if "toklong" in c.raw.decode())
    raw = primary.raw.decode()
    assert "<clipped omitted-chars=" in raw
    assert "so what broke?" in raw  # the end of the message is kept
    assert len(primary.raw) < 60_000  # the 120 KB did not reach the model whole
    snap = await w.snapshot(Platform.FEISHU, LONG)
    original = next(s for s in snap.segments if s.message_id == feishu_message_id(LONG, 1))
    assert original.mentions_me
    # The pipeline keeps the whole message; only the model's copy is clipped.
    assert "line 02999" in original.xml


def recall_arguments(script: BotScript, token: str) -> list[str]:
    """The ids the model passed to ``recall_message`` in the turn ``token`` started, read from the wire
    requests that carry the turn's steps (openai-chat ``tool_calls``)."""
    found: dict[str, None] = {}
    for call in script.primaries:
        if token not in call.raw.decode():
            continue
        for message in json.loads(call.raw)["messages"]:
            for tc in message.get("tool_calls") or ():
                if tc["function"]["name"] == "recall_message":
                    found.setdefault(json.loads(tc["function"]["arguments"])["message_id"], None)
    return list(found)


async def test_the_bot_recalls_its_own_message_by_alias_on_feishu(e2e: tuple[World, BotScript]) -> None:
    w, script = e2e
    await push(w, feishu_text(RECALL, 1, "#recall tokrecallf oops", sender=MEMBER, create_time_ms=now_ms()))

    await until(lambda: bool(w.feishu.recalled), "the recall at the fake Feishu")
    sent = [s for s in w.feishu.sent.values() if s.chat_id == RECALL]
    assert len(sent) == 1
    bot_message = sent[0].message_id
    # The model recalled by the alias send_message answered with: the one the pipeline renders.
    alias = alias_for(RECALL, bot_message)
    await until(lambda: bool(recall_arguments(script, "tokrecallf")), "the turn's step after the recall")
    assert recall_arguments(script, "tokrecallf") == [alias]
    # The wire: one DELETE of that message at Feishu's recall endpoint, from one DeleteMessageAction.
    assert w.feishu.recalled == [bot_message]
    recalls = w.feishu.routed("message.recall")
    assert len(recalls) == 1
    assert recalls[0].path == f"/open-apis/im/v1/messages/{bot_message}"
    deletes = w.tap.of_kind("delete_message", RECALL)
    assert len(deletes) == 1
    assert isinstance(deletes[0], DeleteMessageAction)
    assert deletes[0].message_ids == (bot_message,)

    async def recalled_in_context() -> bool:
        snap = await w.snapshot(Platform.FEISHU, RECALL)
        return any(s.message_id == bot_message and s.is_deleted for s in snap.segments)

    await until(recalled_in_context, "the recalled message deleted in the rendered context")
    snap = await w.snapshot(Platform.FEISHU, RECALL)
    mine = next(s for s in snap.segments if s.message_id == bot_message)
    assert mine.xml.startswith(f'<message id="{alias}"')
    assert script.calls_mentioning("tokrecallf")[0] == 1  # the recall did not wake the bot again


async def test_the_bot_recalls_its_own_message_on_telegram(e2e: tuple[World, BotScript]) -> None:
    w, script = e2e
    w.telegram.enqueue(telegram_text(TG_RECALL, 41, "#recall tokrecallt oops", user=4, date=now_ms() // 1000))

    await until(lambda: bool(w.telegram.calls("deleteMessage")), "the deleteMessage call at the fake Bot API")
    sent = [m for m in w.telegram.sent if m["chat"]["id"] == TG_RECALL]
    assert len(sent) == 1
    bot_message = sent[0]["message_id"]
    # Telegram renders canonical ids: send_message answered with the message's own id.
    await until(lambda: bool(recall_arguments(script, "tokrecallt")), "the turn's step after the recall")
    assert recall_arguments(script, "tokrecallt") == [str(bot_message)]
    calls = w.telegram.calls("deleteMessage")
    assert [(int(c["chat_id"]), int(c["message_id"])) for c in calls] == [(TG_RECALL, bot_message)]
    assert w.telegram.deleted == [(TG_RECALL, bot_message)]
    deletes = w.tap.of_kind("delete_message", str(TG_RECALL))
    assert len(deletes) == 1
    assert isinstance(deletes[0], DeleteMessageAction)
    assert deletes[0].message_ids == (str(bot_message),)
