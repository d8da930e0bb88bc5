"""Scenario tests of the turn's side channels on the real bus: the typing indicator (best-effort, never
blocking the turn) and ``read_image`` against a worker answering ``media.read_image``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from larkbot.canonical.actions import SendMessageAction, TypingAction
from larkbot.canonical.content import AttachmentType
from larkbot.canonical.context import AttachmentRef
from larkbot.canonical.llm import ImagePart, TextPart, ToolResultMessage
from larkbot.canonical.names import Platform
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import CHAT_ID, decide, world
from larkbot.testkit.driver.synthetic import response, segment, tool_call


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


async def test_a_primary_turn_shows_typing_without_waiting_for_it(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db) as w:
        w.platform.typing_gate = asyncio.Event()  # the platform holds typing requests unanswered
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="on it")))
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        assert [d.text for d in w.platform.delivered] == ["on it"]  # the turn did not wait
        assert len(w.platform.typing) == 1
        shown = w.platform.typing[0]
        assert (shown.platform, shown.chat_id) == (Platform.FEISHU, CHAT_ID)
        assert shown.deadline_ms is not None
        assert shown.deadline_ms > w.t0 + 1000
        kinds = [type(r) for r in w.platform.requests]
        assert kinds.index(TypingAction) < kinds.index(SendMessageAction)
        w.platform.typing_gate.set()

        # A react-only activation shows no typing: the bot is not going to write.
        w.probe_answers.append(decide("react_only", "a joke"))
        w.primary_answers.append(response(tool_call(tools.REACT, "r", message_id="m2", emoji="👍")))
        await w.say(2, 5000)
        await w.tick(6000)
        assert len(w.platform.reactions) == 1
        assert len(w.platform.typing) == 1


async def test_read_image_asks_the_media_worker_for_the_platform_file(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db) as w:
        w.media.images["img_v3_cat"] = (ImagePart(blob_key="sha256:cat", mime="image/png"), "a cat on a mat")
        photo = segment(1, at_ms=w.t0, mentions_me=True).model_copy(
            update={
                "xml": '<message id="m1" sender="Alice">look <image mime="image/jpeg" file-id="m1:0"/>'
                '<attachment type="document" name="a.pdf" file-id="m1:1"/></message>',
                "attachments": (
                    AttachmentRef(
                        index=0,
                        type=AttachmentType.PHOTO,
                        file_id="img_v3_cat",
                        blob_key="sha256:original",
                        mime="image/jpeg",
                    ),
                    AttachmentRef(
                        index=1, type=AttachmentType.DOCUMENT, file_id="file_v3_pdf", mime="application/pdf"
                    ),
                ),
            }
        )
        seq = await w.pipeline.append(photo)
        await w.applied(CHAT_ID, seq)
        w.probe_answers.append(decide("send_message", "asked about the photo"))
        w.primary_answers.extend(
            [
                response(
                    tool_call(tools.READ_IMAGE, "i0", file_id="m1:0", detail="high"),
                    tool_call(tools.READ_IMAGE, "i1", file_id="om_1:0", detail="low"),  # the canonical id
                    tool_call(tools.READ_IMAGE, "i2", file_id="m1:1", detail="low"),
                    tool_call(tools.READ_IMAGE, "i3", file_id="m9:0", detail="low"),
                ),
                response(tool_call(tools.SEND, "s", text="a cat")),
            ]
        )
        await w.tick(1000)
        assert [d.text for d in w.platform.delivered] == ["a cat"]
        # The document and the unknown file-id never reached the worker.
        high, low = w.media.requests
        assert (high.platform, high.chat_id, high.message_id) == (Platform.FEISHU, CHAT_ID, "om_1")
        assert (high.file_id, high.blob_key, high.attachment_type) == (
            "img_v3_cat",
            "sha256:original",
            AttachmentType.PHOTO,
        )
        assert high.detail == "high"
        assert high.deadline_ms is not None
        assert (low.message_id, low.file_id, low.detail) == ("om_1", "img_v3_cat", "low")
        followed = w.llm.by_purpose("primary")[1]
        results = [m for m in followed.messages if isinstance(m, ToolResultMessage)]
        assert len(results) == 4
        ok, ok_low, document, unknown = results
        assert not ok.is_error
        assert not ok_low.is_error
        assert ok.parts[0] == ImagePart(blob_key="sha256:cat", mime="image/png", detail="high")
        assert ok.parts[1] == TextPart(text="a cat on a mat")
        assert document.is_error
        assert document.parts == (TextPart(text="error: the attachment 'm1:1' is a document, not an image"),)
        assert unknown.is_error
        assert unknown.parts == (TextPart(text="error: no attachment with file-id 'm9:0'"),)
