"""Where ``media.read_image`` takes the original from: the object store by ``blob_key`` when it is still
there, else the platform file by ``file_id`` through the ingress's ``download`` action."""

from __future__ import annotations

from typing import Any

from larkbot.canonical.content import AttachmentType
from larkbot.canonical.media import ReadImageRequest, ReadImageResponse
from larkbot.canonical.names import SUBJECT_MEDIA_READ_IMAGE
from larkbot.media.core import images
from larkbot.runtime.bus import Bus

from .test_media_service import PHOTO, TIMEOUT, media, opened

STORED = images.content_key(PHOTO)
PURGED = "sha256:" + "0" * 64


def request(n: int, **fields: Any) -> ReadImageRequest:
    return ReadImageRequest.model_validate(
        {
            "request_id": f"r-{n}",
            "platform": "feishu",
            "chat_id": "oc_chat",
            "message_id": "om_1",
            "attachment_type": "photo",
            "detail": "low",
            **fields,
        }
    )


async def test_read_image_reads_the_stored_original_else_downloads_the_platform_file(
    bus: Bus, nats_url: str
) -> None:
    async def ask(req: ReadImageRequest) -> ReadImageResponse:
        answer = await bus.request(SUBJECT_MEDIA_READ_IMAGE, req, ReadImageResponse, timeout_s=TIMEOUT)
        assert answer.ok, answer.error
        assert answer.image is not None
        assert opened(await stack.blob(answer.image.blob_key)).size == (512, 384)
        return answer

    async with media(bus, nats_url, files={"img_v3_cat": PHOTO}) as stack:
        # No blob key: the platform file, downloaded by its key (the ingress stores it by content).
        await ask(request(1, file_id="img_v3_cat"))
        (download,) = stack.ingress.downloads
        assert (download.chat_id, download.message_id, download.file_id, download.attachment_type) == (
            "oc_chat",
            "om_1",
            "img_v3_cat",
            AttachmentType.PHOTO,
        )
        # A stored original is read from the object store: no download, even of a file the ingress lost.
        await ask(request(2, file_id="img_v3_cat", blob_key=STORED))
        await ask(request(3, file_id="gone_from_the_platform", blob_key=STORED))
        assert len(stack.ingress.downloads) == 1
        # A blob key whose object is gone falls back to downloading the platform file.
        await ask(request(4, file_id="img_v3_cat", blob_key=PURGED))
        assert [d.file_id for d in stack.ingress.downloads] == ["img_v3_cat", "img_v3_cat"]
