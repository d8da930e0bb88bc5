"""The browser playground's control API: every action reaches the bot as the update Telegram would send
(read back through the fake Bot API's getUpdates, parsed by aiogram and by the ingress's adapter), the
timeline shows the group as its members see it, and names and texts stay data (escaped in the page, each
its own bidi isolate with its invisible controls shown)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiogram.types import Update
from PIL import Image
from tests.harness.web import read_page, unisolated

from larkbot.cli.playground import PLAYGROUND_CHAT_ID, Playground, PlaygroundRefused
from larkbot.cli.playground_updates import TYPING_S, bot_typing
from larkbot.cli.web import CSP, FAVICON
from larkbot.ingress_telegram.core import ALLOWED_UPDATES, TelegramAdapter
from larkbot.ingress_telegram.fake.wire import Recorded
from larkbot.runtime.config import parse_config
from larkbot.testkit.media import samples

HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_TEXT = "<script>alert('x')</script> \"quoted\" & <b>xml</b>"
BIDI_NAME = "Eve \u202egnp.exe"  # shown as it acts, it reads "Eve exe.png"


@pytest.fixture
async def playground() -> AsyncIterator[Playground]:
    running = Playground(parse_config({}, {}))
    await running.start(0, 0, 0)
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def call(
    http: aiohttp.ClientSession, pg: Playground, path: str, body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    if body is None:
        async with http.get(pg.control_url + path) as resp:
            return resp.status, await resp.json()
    async with http.post(pg.control_url + path, json=body) as resp:
        return resp.status, await resp.json()


async def delivered(http: aiohttp.ClientSession, pg: Playground) -> list[dict[str, Any]]:
    """What the ingress's getUpdates receives (and confirms), checked by aiogram and the adapter."""
    api = f"{pg.telegram.base_url}/bot{pg.telegram.token}/getUpdates"
    params = {"timeout": "0", "allowed_updates": json.dumps(list(ALLOWED_UPDATES))}
    async with http.get(api, params=params) as resp:
        updates: list[dict[str, Any]] = (await resp.json())["result"]
    if updates:
        params["offset"] = str(updates[-1]["update_id"] + 1)
        async with http.get(api, params=params) as resp:
            assert (await resp.json())["ok"]
    adapter = TelegramAdapter(str(pg.telegram.bot_id), frozenset({str(PLAYGROUND_CHAT_ID)}), 0)
    for update in updates:
        Update.model_validate(update)
        adapted = adapter.adapt(update, 0)
        assert adapted.events, (adapted.dropped, update)
    return updates


async def bot_says(http: aiohttp.ClientSession, pg: Playground, html: str, reply_to: int) -> int:
    api = f"{pg.telegram.base_url}/bot{pg.telegram.token}/sendMessage"
    body = {"chat_id": PLAYGROUND_CHAT_ID, "text": html, "parse_mode": "HTML",
            "reply_parameters": {"message_id": reply_to}}  # fmt: skip
    async with http.post(api, json=body) as resp:
        return int((await resp.json())["result"]["message_id"])


def u16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


async def test_a_post_is_a_message_update_with_mentions_in_utf16(
    playground: Playground, http: aiohttp.ClientSession
) -> None:
    text = "前面 😀👍🏽 hi @larkbot_test_bot, ask @Bob_2024 (not a@mail.com)"
    status, answer = await call(http, playground, "/say", {"user": "Alice", "text": text})
    assert status == 200
    assert answer["ok"]
    assert set(answer) == {"ok", "message_id", "cursor"}
    (update,) = await delivered(http, playground)
    message = update["message"]
    assert message["message_id"] == answer["message_id"]
    assert message["from"] == {"id": message["from"]["id"], "is_bot": False, "first_name": "Alice"}
    assert message["chat"] == {"id": PLAYGROUND_CHAT_ID, "type": "supergroup", "title": "LarkBot playground"}
    assert message["text"] == text
    assert isinstance(message["date"], int)
    first = text.index("@larkbot_test_bot")
    second = text.index("@Bob_2024")
    assert message["entities"] == [
        {"type": "mention", "offset": u16(text[:first]), "length": 17},
        {"type": "mention", "offset": u16(text[:second]), "length": 9},
    ]
    units = text.encode("utf-16-le")
    for entity in message["entities"]:
        start, end = 2 * entity["offset"], 2 * (entity["offset"] + entity["length"])
        assert units[start:end].decode("utf-16-le") in ("@larkbot_test_bot", "@Bob_2024")
    assert u16(text[:first]) != first  # the emoji before it count twice in UTF-16


async def test_a_reply_carries_the_replied_message_whether_a_members_or_the_bots(
    playground: Playground, http: aiohttp.ClientSession
) -> None:
    _, first = await call(http, playground, "/say", {"user": "Alice", "text": "hello @larkbot_test_bot?"})
    _, second = await call(
        http, playground, "/say", {"user": "Bob", "text": "me too", "reply_to": first["message_id"]}
    )
    bot_id = await bot_says(http, playground, "I read: <b>hello</b> &lt;3", first["message_id"])
    _, third = await call(http, playground, "/say", {"user": "Carol", "text": "nice", "reply_to": bot_id})
    _, _, reply_to_bot = await delivered(http, playground)
    assert reply_to_bot["message"]["reply_to_message"]["from"]["is_bot"] is True
    assert reply_to_bot["message"]["reply_to_message"]["text"] == "I read: hello <3"
    _, timeline = await call(http, playground, "/messages")
    ids = [m["id"] for m in timeline["messages"]]
    assert ids == sorted(ids) == [first["message_id"], second["message_id"], bot_id, third["message_id"]]
    by_id = {m["id"]: m for m in timeline["messages"]}
    assert by_id[second["message_id"]]["reply_to"] == first["message_id"]
    bot = by_id[bot_id]
    assert bot["from"] == "bot"
    assert bot["is_bot"]
    assert bot["text"] == "I read: hello <3"
    assert bot["inspect"] == (
        f"http://127.0.0.1:9188/find?platform=telegram&chat={PLAYGROUND_CHAT_ID}&message={bot_id}"
    )
    assert timeline["inspector"] == "http://127.0.0.1:9188"
    assert timeline["bot"]["username"] == "larkbot_test_bot"
    assert timeline["members"] == ["Alice", "Bob", "Carol"]
    status, refused = await call(http, playground, "/say", {"user": "Bob", "text": "?", "reply_to": 1})
    assert status == 404
    assert not refused["ok"]


async def test_reactions_of_members_and_of_the_bot(
    playground: Playground, http: aiohttp.ClientSession
) -> None:
    _, said = await call(http, playground, "/say", {"user": "Alice", "text": "react to me"})
    mid = said["message_id"]
    await call(http, playground, "/react", {"user": "Bob", "message_id": mid, "emoji": "👍"})
    await call(http, playground, "/react", {"user": "Bob", "message_id": mid, "emoji": "🔥"})
    await call(http, playground, "/react", {"user": "Bob", "message_id": mid, "emoji": None})
    _, unchanged = await call(http, playground, "/react", {"user": "Bob", "message_id": mid, "emoji": None})
    assert unchanged == {"ok": True, "changed": False}
    _, added, replaced, removed = await delivered(http, playground)
    body = added["message_reaction"]
    assert set(body) == {"chat", "message_id", "user", "date", "old_reaction", "new_reaction"}
    assert body["message_id"] == mid
    assert body["user"]["first_name"] == "Bob"
    assert (body["old_reaction"], body["new_reaction"]) == ([], [{"type": "emoji", "emoji": "👍"}])
    assert replaced["message_reaction"]["old_reaction"] == [{"type": "emoji", "emoji": "👍"}]
    assert replaced["message_reaction"]["new_reaction"] == [{"type": "emoji", "emoji": "🔥"}]
    assert removed["message_reaction"]["new_reaction"] == []
    status, _ = await call(http, playground, "/react", {"user": "Bob", "message_id": mid, "emoji": "🦖"})
    assert status == 400
    await call(http, playground, "/react", {"user": "Carol", "message_id": mid, "emoji": "👀"})
    api = f"{playground.telegram.base_url}/bot{playground.telegram.token}/setMessageReaction"
    reaction = [{"type": "emoji", "emoji": "👀"}]
    async with http.post(api, json={"chat_id": PLAYGROUND_CHAT_ID, "message_id": mid, "reaction": reaction}):
        pass
    _, timeline = await call(http, playground, "/messages")
    (entry,) = timeline["messages"]
    assert entry["reactions"] == [{"emoji": "👀", "members": ["Carol"], "bot": True, "count": 2}]


async def test_an_edit_is_an_edited_message_and_only_the_author_edits_or_deletes(
    playground: Playground, http: aiohttp.ClientSession
) -> None:
    _, said = await call(http, playground, "/say", {"user": "Alice", "text": "tpyo"})
    mid = said["message_id"]
    assert (await call(http, playground, "/edit", {"user": "Bob", "message_id": mid, "text": "x"}))[0] == 403
    assert (await call(http, playground, "/delete", {"user": "Bob", "message_id": mid}))[0] == 403
    status, _ = await call(
        http, playground, "/edit", {"user": "Alice", "message_id": mid, "text": "typo @Bob_2024"}
    )
    assert status == 200
    _, edit = await delivered(http, playground)
    edited = edit["edited_message"]
    assert edited["message_id"] == mid
    assert edited["text"] == "typo @Bob_2024"
    assert isinstance(edited["edit_date"], int)
    assert edited["from"]["first_name"] == "Alice"
    assert edited["entities"] == [{"type": "mention", "offset": 5, "length": 9}]
    status, deleted = await call(http, playground, "/delete", {"user": "Alice", "message_id": mid})
    assert status == 200
    assert deleted == {"ok": True, "bot_told": False}
    assert await delivered(http, playground) == []  # Telegram has no update for it
    _, timeline = await call(http, playground, "/messages")
    (entry,) = timeline["messages"]
    assert entry["edited"]
    assert entry["deleted"]
    assert entry["deleted_by"] == "member"
    assert (await call(http, playground, "/edit", {"user": "Alice", "message_id": mid, "text": "y"}))[
        0
    ] == 404


def image(kind: str, size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (200, 80, 40)).save(out, format=kind)
    return out.getvalue()


async def upload(
    http: aiohttp.ClientSession, pg: Playground, data: bytes, caption: str = "", filename: str = "x.bin"
) -> tuple[int, dict[str, Any]]:
    form = aiohttp.FormData()
    form.add_field("user", "Carol")
    form.add_field("caption", caption)
    form.add_field("file", io.BytesIO(data), filename=filename, content_type="application/octet-stream")
    async with http.post(pg.control_url + "/upload", data=form) as resp:
        return resp.status, await resp.json()


@pytest.mark.parametrize(("kind", "content_type"), [("PNG", "image/png"), ("JPEG", "image/jpeg")])
async def test_an_uploaded_image_is_a_photo_message_with_its_real_size(
    playground: Playground, http: aiohttp.ClientSession, kind: str, content_type: str
) -> None:
    data = image(kind, (321, 123))
    status, answer = await upload(http, playground, data, "look @larkbot_test_bot")
    assert status == 200, answer
    (update,) = await delivered(http, playground)
    message = update["message"]
    (size,) = message["photo"]
    assert (size["width"], size["height"], size["file_size"]) == (321, 123, len(data))
    assert set(size) == {"file_id", "file_unique_id", "width", "height", "file_size"}
    assert message["caption"] == "look @larkbot_test_bot"
    assert "text" not in message
    assert message["caption_entities"] == [{"type": "mention", "offset": 5, "length": 17}]
    api = f"{playground.telegram.base_url}/bot{playground.telegram.token}"
    async with http.post(f"{api}/getFile", json={"file_id": size["file_id"]}) as resp:
        path = (await resp.json())["result"]["file_path"]
    async with http.get(f"{playground.telegram.base_url}/file/bot{playground.telegram.token}/{path}") as resp:
        assert await resp.read() == data
    _, timeline = await call(http, playground, "/messages")
    photo = timeline["messages"][0]["photo"]
    assert (photo["width"], photo["height"]) == (321, 123)
    async with http.get(playground.control_url + photo["url"]) as resp:
        assert resp.content_type == content_type
        assert await resp.read() == data
        assert resp.headers["Content-Security-Policy"] == CSP


async def test_a_recording_is_a_voice_message_and_a_sound_file_an_audio_message(
    playground: Playground, http: aiohttp.ClientSession
) -> None:
    voice, song = samples.voice_note(3.0), samples.audio_file(2.0)
    status, answer = await upload(http, playground, voice, "listen")
    assert status == 200, answer
    status, answer = await upload(http, playground, song, filename="tone.m4a")
    assert status == 200, answer
    first, second = await delivered(http, playground)
    note = first["message"]["voice"]
    assert (note["duration"], note["mime_type"], note["file_size"]) == (3, "audio/ogg", len(voice))
    assert set(note) == {"file_id", "file_unique_id", "duration", "mime_type", "file_size"}
    assert first["message"]["caption"] == "listen"
    assert "photo" not in first["message"]
    audio = second["message"]["audio"]
    assert (audio["duration"], audio["mime_type"], audio["file_name"]) == (2, "audio/mp4", "tone.m4a")
    api = f"{playground.telegram.base_url}/bot{playground.telegram.token}"
    async with http.post(f"{api}/getFile", json={"file_id": note["file_id"]}) as resp:
        path = (await resp.json())["result"]["file_path"]
    async with http.get(f"{playground.telegram.base_url}/file/bot{playground.telegram.token}/{path}") as resp:
        assert await resp.read() == voice
    _, timeline = await call(http, playground, "/messages")
    recording = timeline["messages"][0]["recording"]
    assert (recording["kind"], recording["duration"]) == ("voice", 3)
    assert timeline["messages"][1]["recording"]["name"] == "tone.m4a"
    async with http.get(playground.control_url + recording["url"]) as resp:
        assert resp.content_type == "audio/ogg"
        assert await resp.read() == voice
        assert "media-src 'self'" in resp.headers["Content-Security-Policy"]


async def test_an_upload_that_is_not_a_photo_is_refused(
    playground: Playground, http: aiohttp.ClientSession
) -> None:
    status, answer = await upload(http, playground, b"<svg xmlns='http://www.w3.org/2000/svg'/>")
    assert status == 415
    assert "not a JPEG, PNG or WebP" in answer["error"]
    status, answer = await upload(http, playground, image("GIF", (4, 4)))
    assert status == 415
    status, answer = await upload(http, playground, b"\x89PNG" + b"\0" * (10 * 1024 * 1024))
    assert status == 413
    assert "10 MB" in answer["error"]
    assert await delivered(http, playground) == []


async def test_hostile_names_and_texts_stay_data(playground: Playground, http: aiohttp.ClientSession) -> None:
    await call(http, playground, "/members", {"name": HOSTILE_NAME})
    await call(http, playground, "/say", {"user": HOSTILE_NAME, "text": HOSTILE_TEXT})
    _, timeline = await call(http, playground, "/messages")
    assert timeline["members"][-1] == HOSTILE_NAME
    assert timeline["messages"][0]["from"] == HOSTILE_NAME
    assert timeline["messages"][0]["text"] == HOSTILE_TEXT
    async with http.get(playground.control_url + "/") as resp:
        page = await resp.text()
        assert resp.headers["Content-Security-Policy"] == CSP
    assert HOSTILE_NAME not in page
    assert "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # the member switcher, escaped
    assert page.count("<script") == 1
    assert '<script src="/static/playground.js" defer></script>' in page
    assert 'id="model-banner"' in page
    assert "demo script, not a model" in page


async def test_a_bidi_name_is_shown_as_stored_and_posted_back_as_it_is(
    playground: Playground, http: aiohttp.ClientSession
) -> None:
    status, _ = await call(http, playground, "/members", {"name": BIDI_NAME})
    assert status == 200
    async with http.get(playground.control_url + "/") as resp:
        page = await resp.text()
    texts, attributes = read_page(page)
    assert all("\u202e" not in t.text for t in texts)
    (label,) = [t for t in texts if "gnp.exe" in t.text]
    assert label.inside("option")
    assert label.text == "\u2068Eve \u2066⟨U+202E⟩\u2069gnp.exe\u2069"  # isolated, the control shown
    # The option's value is what the page posts as the member: the name exactly.
    assert [v for tag, name, v in attributes if "gnp.exe" in v] == [BIDI_NAME]
    assert [(tag, name) for tag, name, v in attributes if "gnp.exe" in v] == [("option", "value")]
    bot = playground.telegram.bot_user
    assert unisolated(page, bot["first_name"], bot["username"], "LarkBot playground") == []
    assert f'<link rel="icon" href="{FAVICON}" type="image/svg+xml">' in page
    async with http.get(playground.control_url + "/favicon.ico") as resp:
        assert resp.status == 200
        assert resp.content_type == "image/svg+xml"
        assert resp.headers["Content-Security-Policy"] == CSP


async def test_the_page_and_its_static_files_carry_the_csp_and_the_script_writes_text_only(
    playground: Playground, http: aiohttp.ClientSession
) -> None:
    for name, kind in [("playground.js", "javascript"), ("playground.css", "text/css")]:
        async with http.get(f"{playground.control_url}/static/{name}") as resp:
            assert resp.status == 200
            assert kind in resp.content_type
            assert resp.headers["Content-Security-Policy"] == CSP
            source = await resp.text()
        for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "http://",
                       "https://", "@import", "url("):  # fmt: skip
            assert banned not in source, (name, banned)


async def test_message_ids_are_unique_and_increasing_for_posts_in_the_same_millisecond(
    playground: Playground, http: aiohttp.ClientSession
) -> None:
    posts = [call(http, playground, "/say", {"user": "Bob", "text": f"{i}"}) for i in range(20)]
    ids = [answer["message_id"] for _, answer in await asyncio.gather(*posts)]
    assert len(set(ids)) == 20
    assert [u["message"]["message_id"] for u in await delivered(http, playground)] == sorted(ids)


def test_a_real_endpoint_is_named_instead_of_the_demo_banner() -> None:
    endpoints = {
        "local": {"format": "openai-chat", "base_url": "http://127.0.0.1:11434/v1", "model": "qwen3:8b"}
    }
    config = parse_config({"llm": {"endpoints": endpoints, "primary": "local"}}, {})
    pg = Playground(config)
    assert pg.control.model == {"fake": False, "endpoint": "local", "model": "qwen3:8b"}


def test_beyond_loopback_the_playground_needs_a_token() -> None:
    with pytest.raises(PlaygroundRefused, match=r"inspector\.access_token"):
        Playground(parse_config({}, {}), host="0.0.0.0")
    token = {"inspector": {"access_token": "a-long-enough-token-1234"}}
    assert Playground(parse_config(token, {}), host="0.0.0.0").token is not None


async def test_with_a_token_the_control_api_asks_for_it(http: aiohttp.ClientSession) -> None:
    token = "a-long-enough-token-1234"
    pg = Playground(parse_config({"inspector": {"access_token": token}}, {}))
    await pg.start(0, 0, 0)
    try:
        async with http.get(pg.control_url + "/messages") as resp:
            assert resp.status == 401
        async with http.get(
            pg.control_url + "/messages", headers={"Authorization": f"Bearer {token}"}
        ) as resp:
            assert resp.status == 200
    finally:
        await pg.stop()


def _typing(at: float, chat: int = PLAYGROUND_CHAT_ID, action: str = "typing") -> Recorded:
    return Recorded("sendChatAction", {"chat_id": str(chat), "action": action}, at)


def _sent(at: float, chat: int = PLAYGROUND_CHAT_ID) -> Recorded:
    return Recorded("sendMessage", {"chat_id": chat, "text": "hi"}, at)


@pytest.mark.parametrize(
    ("requests", "now", "typing"),
    [
        ([], 10.0, False),
        ([_typing(10.0)], 10.5, True),
        ([_typing(10.0)], 10.0 + TYPING_S + 0.1, False),  # Telegram shows it for 5 s
        ([_typing(10.0), _sent(11.0)], 11.5, False),  # the message ends it
        ([_sent(9.0), _typing(10.0)], 10.5, True),
        ([_typing(10.0, chat=-100123)], 10.5, False),  # another chat
        ([_typing(10.0, action="upload_photo")], 10.5, False),
        ([_typing(10.0), _sent(11.0, chat=-100123)], 11.5, True),
    ],
)
def test_the_bot_is_shown_typing_as_telegram_shows_it(
    requests: list[Recorded], now: float, typing: bool
) -> None:
    assert bot_typing(requests, PLAYGROUND_CHAT_ID, now) is typing
