"""Attachment refs on rendered segments: what the driver needs to turn a rendered file-id into the platform's
file (pure)."""

from __future__ import annotations

import re

from larkbot.canonical.content import Attachment, AttachmentType
from larkbot.canonical.context import AttachmentRef, Segment
from larkbot.canonical.events import CanonicalEvent
from larkbot.canonical.names import Platform
from larkbot.pipeline.core import Projection, RenderParams, alias_for, replay
from larkbot.pipeline.core.admission import Admission
from larkbot.testkit.pipeline import synthetic as s
from larkbot.testkit.pipeline.fakes import succeed

ALICE = s.person("ou_alice", "Alice")
FEISHU = RenderParams(Platform.FEISHU, "oc_chat", deployment_utc_offset_min=480)
ALIASED = RenderParams(Platform.FEISHU, "oc_chat", alias_message_ids=True, deployment_utc_offset_min=480)
DIGEST = "sha256:" + "ab" * 32
_FILE_IDS = re.compile(r'file-id="([^"]+)"')

DOCUMENT = Attachment(type=AttachmentType.DOCUMENT, file_id="file_v3_doc", mime="", name="a.pdf")
STICKER = Attachment(type=AttachmentType.STICKER, file_id="st_1", content_hash="not-a-store-key")


def segments(*events: CanonicalEvent, params: RenderParams = FEISHU) -> tuple[Segment, ...]:
    projection = Projection(params)
    for event in events:
        projection.apply(event)
    return projection.segments


def file_ids(segment: Segment) -> list[str]:
    return _FILE_IDS.findall(segment.xml)


def test_every_rendered_attachment_has_a_ref_under_its_file_id_index() -> None:
    photo = s.photo("img_v3_cat", content_hash=DIGEST, thumbnail_key="th_1")
    event = s.message("om_1", "look", sender=ALICE, attachments=(photo, DOCUMENT, STICKER))
    (segment,) = segments(event, params=ALIASED)
    shown = alias_for("oc_chat", "om_1")
    assert file_ids(segment) == [f"{shown}:0", f"{shown}:1", f"{shown}:2"]
    assert segment.attachments == (
        AttachmentRef(
            index=0, type=AttachmentType.PHOTO, file_id="img_v3_cat", blob_key=DIGEST, mime="image/jpeg"
        ),
        # An empty mime is no mime; a content hash that is not an object-store key is no blob key.
        # read_file names the document and refuses a large one before downloading it.
        AttachmentRef(index=1, type=AttachmentType.DOCUMENT, file_id="file_v3_doc", name="a.pdf"),
        AttachmentRef(index=2, type=AttachmentType.STICKER, file_id="st_1"),
    )
    assert [f"{shown}:{ref.index}" for ref in segment.attachments] == file_ids(segment)


def test_messages_without_attachments_and_other_nodes_carry_none() -> None:
    rendered = segments(s.message("om_1", "text only"), s.reaction("om_1", "👍"))
    assert [seg.attachments for seg in rendered] == [(), ()]


def test_deleted_and_blocked_messages_show_no_file_id_and_carry_no_ref() -> None:
    photo = s.photo()
    (deleted,) = segments(s.message("om_1", "x", attachments=(photo,)), s.delete("om_1"))
    assert deleted.attachments == ()
    blocked_params = RenderParams(
        Platform.FEISHU, "oc_chat", blocked_users=frozenset({"ou_alice"}), deployment_utc_offset_min=480
    )
    (blocked,) = segments(s.message("om_1", "x", sender=ALICE, attachments=(photo,)), params=blocked_params)
    assert file_ids(blocked) == []
    assert blocked.attachments == ()


def test_an_edit_replaces_the_refs_with_the_new_attachments() -> None:
    first = s.message("om_1", "x", attachments=(s.photo("img_a"), s.photo("img_b")))
    edit = s.edit("om_1", "y").model_copy(update={"attachments": (s.photo("img_b"),)})
    (segment,) = segments(first, edit)
    assert file_ids(segment) == ["om_1:0"]
    assert [(ref.index, ref.file_id) for ref in segment.attachments] == [(0, "img_b")]


def test_the_blob_key_comes_from_the_media_result_and_survives_a_cold_replay() -> None:
    admission: Admission[str] = Admission()
    event = s.message("om_1", "look", attachments=(DOCUMENT, s.photo("img_v3_cat")))
    (job,) = admission.admit(("feishu", "oc_chat"), event, "t1", now=0.0)
    assert job.attachment_index == 1  # the document needs no transform
    assert admission.result(succeed(job), now=1.0)
    (pending,) = admission.take_ready()
    completed, _alts = pending.completed()
    (live,) = segments(completed)
    assert live.attachments[1] == AttachmentRef(
        index=1,
        type=AttachmentType.PHOTO,
        file_id="img_v3_cat",
        blob_key=f"sha256:{job.job_id}",
        mime="image/jpeg",
    )
    assert live.attachments[0].blob_key is None
    assert replay([(1, completed)], FEISHU).segments == (live,)
