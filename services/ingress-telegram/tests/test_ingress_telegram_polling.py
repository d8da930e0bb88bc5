"""The long-poll session's own work per ``getUpdates`` answer (``adapters.polling``)."""

from __future__ import annotations

import gc
import json
import weakref

from aiogram import Bot
from aiogram.methods import GetUpdates

from larkbot.ingress_telegram.adapters.polling import RawUpdatesSession

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
