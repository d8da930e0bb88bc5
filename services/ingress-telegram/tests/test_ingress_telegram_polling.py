"""The long-poll session's own work per ``getUpdates`` answer (``adapters.polling``)."""

from __future__ import annotations

import gc
import json
import weakref

import pytest
from aiogram import Bot
from aiogram.exceptions import TelegramServerError
from aiogram.methods import GetUpdates
from prometheus_client import REGISTRY

from larkbot.ingress_telegram.adapters.polling import RawUpdatesSession
from larkbot.ingress_telegram.fake import FakeBotApi

ANSWER = json.dumps(
    {
        "ok": True,
        "result": [
            {
                "update_id": 5,
                "message": {"message_id": 1, "date": 1, "chat": {"id": -1, "type": "group"}, "text": "hi"},
            }
        ],
    }
)


async def test_the_answer_model_is_built_once_not_after_every_collection() -> None:
    # aiogram asks pydantic for Response[list[Update]] at every answer; pydantic keeps the generated
    # model only weakly, and rebuilding it costs milliseconds on the path of every inbound message.
    session = RawUpdatesSession("http://127.0.0.1:1")
    bot = Bot("123456:" + "A" * 35, session=session)
    try:
        response = session.check_response(bot, GetUpdates(), 200, ANSWER)
        assert [update.update_id for update in response.result or []] == [5]
        model = weakref.ref(type(response))
        del response
        gc.collect()
        assert model() is not None
        assert type(session.check_response(bot, GetUpdates(), 200, ANSWER)) is model()
    finally:
        await session.close()


async def test_failing_polling_is_shown_until_a_poll_succeeds() -> None:
    fake = FakeBotApi()
    await fake.start()
    session = RawUpdatesSession(fake.base_url)
    bot = Bot(fake.token, session=session)
    try:
        fake.fail("getUpdates", 502)
        with pytest.raises(TelegramServerError):
            await bot(GetUpdates(timeout=0))
        assert session.poll_failing
        assert REGISTRY.get_sample_value("larkbot_telegram_polling_failing") == 1
        await bot(GetUpdates(timeout=0))
        assert not session.poll_failing
        assert REGISTRY.get_sample_value("larkbot_telegram_polling_failing") == 0
    finally:
        await session.close()
        await fake.stop()
