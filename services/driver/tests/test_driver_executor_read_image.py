"""``read_image``: a rendered file-id resolves to the platform's file through the segments' and history
items' attachment refs, never through the XML (executor against scripted clients, no bus)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from larkbot.canonical.content import AttachmentType
from larkbot.canonical.context import AttachmentRef, HistoryItem, HistoryRequest, HistoryResponse
from larkbot.canonical.llm import ImagePart, TextPart
from larkbot.canonical.media import ReadImageRequest, ReadImageResponse
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.clients import BusClients
from larkbot.driver.wake.clock import ManualClock
from larkbot.driver.wake.core.turn import ToolDone, ToolRun
from larkbot.driver.wake.executor import ToolExecutor
from larkbot.runtime.bus import Bus, BusUnavailable
from larkbot.testkit.driver.synthetic import segment

T0 = 1_700_000_000_000
CAT = AttachmentRef(
    index=0, type=AttachmentType.PHOTO, file_id="img_cat", blob_key="sha256:cat", mime="image/jpeg"
)
PDF = AttachmentRef(index=1, type=AttachmentType.DOCUMENT, file_id="file_pdf", mime="application/pdf")
PNG_FILE = AttachmentRef(index=0, type=AttachmentType.DOCUMENT, file_id="file_png", mime="image/png")
OLD_DOG = AttachmentRef(index=2, type=AttachmentType.ANIMATION, file_id="st_dog")
FEISHU_STICKER = AttachmentRef(index=1, type=AttachmentType.STICKER, file_id="v3_sticker")


class ScriptedClients(BusClients):
    """``pipeline.history`` answers from ``history``; ``media.read_image`` answers every request with an
    image."""

    def __init__(self, history: tuple[HistoryItem, ...] = ()) -> None:
        super().__init__(cast(Bus, None))
        self.items = history
        self.lookups: list[tuple[str, ...]] = []
        self.reads: list[ReadImageRequest] = []
        self.pipeline_down = False

    async def history(self, request: HistoryRequest) -> HistoryResponse:
        if self.pipeline_down:
            raise BusUnavailable("no responders")
        self.lookups.append(request.message_ids)
        found = [
            i for i in self.items if i.message_id in request.message_ids or i.alias in request.message_ids
        ]
        known = {i.message_id for i in found} | {i.alias for i in found}
        return HistoryResponse(
            found=tuple(found), missing=tuple(m for m in request.message_ids if m not in known)
        )

    async def read_image(self, request: ReadImageRequest, timeout_s: float) -> ReadImageResponse:
        self.reads.append(request)
        image = ImagePart(blob_key=f"png-of-{request.file_id}", mime="image/png", detail=request.detail)
        return ReadImageResponse(request_id=request.request_id, ok=True, image=image)


def executor(clients: ScriptedClients) -> ToolExecutor:
    live = (
        segment(1).model_copy(update={"attachments": (CAT, PDF)}),
        segment(2).model_copy(update={"attachments": (PNG_FILE, FEISHU_STICKER)}),
        segment(3).model_copy(update={"is_deleted": True}),  # a deleted message shows no attachment
    )
    return ToolExecutor(clients, ManualClock(T0), "feishu", "oc_chat", live, max_segment_tokens=4000)


def call(name: str, n: int = 0, **args: Any) -> ToolRun:
    return ToolRun(1, n, name, args, f"key-{n}", T0 + 10_000)


async def read(ex: ToolExecutor, file_id: str) -> ToolDone:
    return await ex.run(call(tools.READ_IMAGE, file_id=file_id, detail="low"))


async def test_live_attachments_resolve_by_alias_or_canonical_id_to_the_platform_file() -> None:
    clients = ScriptedClients()
    ex = executor(clients)
    for file_id in ("m1:0", "om_1:0"):
        done = await read(ex, file_id)
        assert done.ok
        assert done.parts == (ImagePart(blob_key="png-of-img_cat", mime="image/png", detail="low"),)
    first, second = clients.reads
    assert (first.message_id, first.file_id, first.blob_key, first.attachment_type) == (
        "om_1",
        "img_cat",
        "sha256:cat",
        AttachmentType.PHOTO,
    )
    assert second.model_copy(update={"request_id": first.request_id}) == first
    # A document that is a picture can be read; its type goes with it.
    assert (await read(ex, "m2:0")).ok
    assert (clients.reads[-1].file_id, clients.reads[-1].attachment_type) == (
        "file_png",
        AttachmentType.DOCUMENT,
    )
    assert clients.lookups == []


@pytest.mark.parametrize(
    ("file_id", "error"),
    [
        ("m1:1", "error: the attachment 'm1:1' is a document, not an image"),
        ("m2:1", "error: Feishu does not let bots see stickers ('m2:1')"),
        ("m1:2", "error: no attachment with file-id 'm1:2'"),
        ("m3:0", "error: no attachment with file-id 'm3:0'"),
        ("m1", "error: no attachment with file-id 'm1'"),
        ("m1:", "error: no attachment with file-id 'm1:'"),
        (":0", "error: no attachment with file-id ':0'"),
        ("m1:-1", "error: no attachment with file-id 'm1:-1'"),
        ("m1:٠", "error: no attachment with file-id 'm1:٠'"),
        ("m404:0", "error: no attachment with file-id 'm404:0'"),
    ],
)
async def test_what_names_no_image_is_an_error_result_and_reaches_no_worker(file_id: str, error: str) -> None:
    clients = ScriptedClients()
    done = await read(executor(clients), file_id)
    assert not done.ok
    assert not done.final
    assert done.parts == (TextPart(text=error),)
    assert clients.reads == []


async def test_an_image_of_an_old_message_resolves_through_its_history_item() -> None:
    old = HistoryItem(message_id="om_old", alias="mold", xml="<message/>", attachments=(OLD_DOG,))
    clients = ScriptedClients(history=(old,))
    ex = executor(clients)
    done = await read(ex, "mold:2")
    assert done.ok
    assert clients.lookups == [("mold",)]
    (request,) = clients.reads
    assert (request.message_id, request.file_id, request.blob_key, request.attachment_type) == (
        "om_old",
        "st_dog",
        None,
        AttachmentType.ANIMATION,
    )
    assert not (await read(ex, "mold:0")).ok  # no such index; the item is not looked up again
    assert clients.lookups == [("mold",)]


async def test_messages_read_with_read_old_messages_need_no_second_lookup() -> None:
    old = HistoryItem(message_id="om_old", alias="mold", xml="<message/>", attachments=(OLD_DOG,))
    clients = ScriptedClients(history=(old,))
    ex = executor(clients)
    assert (await ex.run(call(tools.READ_OLD, message_ids=["om_old"]))).ok
    assert (await read(ex, "mold:2")).ok
    assert (await read(ex, "om_old:2")).ok
    assert clients.lookups == [("om_old",)]
    assert [r.file_id for r in clients.reads] == ["st_dog", "st_dog"]


async def test_an_unreachable_pipeline_is_an_error_result() -> None:
    clients = ScriptedClients()
    clients.pipeline_down = True
    done = await read(executor(clients), "mold:0")
    assert not done.ok
    assert done.parts == (TextPart(text="error: the service is unavailable, try later"),)
