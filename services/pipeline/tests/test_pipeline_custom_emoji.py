"""Telegram custom emoji wait for their description, which the event then records; what a committed
segment shows never changes afterwards (pure)."""

from __future__ import annotations

from larkbot.canonical.content import Attachment, AttachmentType, Bold, CustomEmoji, Inline, Text
from larkbot.canonical.events import MessageEvent
from larkbot.canonical.fingerprint import event_fingerprint
from larkbot.canonical.names import Platform
from larkbot.media.core.jobs import succeeded
from larkbot.pipeline.core import Projection, RenderParams, render_keys, replay
from larkbot.pipeline.core.admission import Admission
from larkbot.pipeline.core.repeats import classify
from larkbot.testkit.pipeline import synthetic as s
from larkbot.testkit.pipeline.fakes import fail

TELEGRAM = RenderParams(Platform.TELEGRAM, "-1001", deployment_utc_offset_min=480)
CHAT = ("telegram", "-1001")
DUCK, CAT = "5368324170671202286", "5368324170671202999"


def emoji(emoji_id: str, alt: str = "🙂") -> CustomEmoji:
    return CustomEmoji(alt=alt, emoji_id=emoji_id)


def message(message_id: str, *nodes: Inline) -> MessageEvent:
    return s.message(message_id, platform=Platform.TELEGRAM, chat="-1001", nodes=nodes)


def test_one_job_per_distinct_emoji_and_the_description_is_written_into_the_event() -> None:
    admission: Admission[str] = Admission()
    event = message("7", Text(text="hi "), emoji(DUCK), Bold(children=(emoji(DUCK), emoji(CAT, "😺"))))
    jobs = admission.admit(CHAT, event, "t", now=0.0)
    assert [(j.transform, j.file_id, j.attachment_index) for j in jobs] == [
        ("custom_emoji", DUCK, None),
        ("custom_emoji", CAT, None),
    ]
    duck, cat = jobs
    duck_described = succeeded(duck, content_hash=None, alt_text="a duck waving", pack="Ducks")
    assert admission.result(duck_described, now=1.0) is False
    assert admission.take_ready() == []  # the chat waits for every emoji of its head
    assert admission.result(fail(cat, "unreadable", retryable=False), now=1.0) is True
    (pending,) = admission.take_ready()
    completed, alts = pending.completed()
    assert alts == [(f"emoji:{DUCK}", "a duck waving")]
    assert render_keys(completed) == {f"emoji:{DUCK}"}
    projection = Projection(TELEGRAM, alt_texts=dict(alts))
    projection.apply(completed)
    (segment,) = projection.segments
    assert (
        '<custom-emoji pack="Ducks">a duck waving</custom-emoji>'
        '<b><custom-emoji pack="Ducks">a duck waving</custom-emoji><custom-emoji>😺</custom-emoji></b>'
    ) in segment.xml
    # The stored event is the same event as the ingress's copy: a redelivery is a duplicate.
    assert event_fingerprint(completed) == event_fingerprint(event)
    assert classify(completed, event) == "duplicate"


def test_an_emoji_committed_undescribed_keeps_its_fallback_when_the_id_is_described_later() -> None:
    admission: Admission[str] = Admission()
    first = message("7", emoji(DUCK))
    (job,) = admission.admit(CHAT, first, "t1", now=0.0)
    admission.result(fail(job, "vision", retryable=False), now=1.0)
    (early,) = admission.take_ready()
    early_event, _ = early.completed()
    second = message("8", emoji(DUCK))
    (job2,) = admission.admit(CHAT, second, "t2", now=2.0)
    admission.result(succeeded(job2, content_hash=None, alt_text="a duck waving", pack="Ducks"), now=3.0)
    (late,) = admission.take_ready()
    late_event, alts = late.completed()
    cache: dict[str, str] = {}  # the pipeline's one alt-text map, shared by the chat's renderer

    live = Projection(TELEGRAM, alt_texts=cache)
    live.apply(early_event, 1)
    cache.update(alts)  # the description arrives with the later event's commit
    live.apply(late_event, 2)
    xml = [segment.xml for segment in live.segments]
    assert "<custom-emoji>🙂</custom-emoji>" in xml[0]
    assert '<custom-emoji pack="Ducks">a duck waving</custom-emoji>' in xml[1]
    # A cold replay with the whole cache renders the same bytes: the first event records no description.
    assert [
        s.xml for s in replay([(1, early_event), (2, late_event)], TELEGRAM, alt_texts=cache).segments
    ] == xml


def test_feishu_emoji_and_emoji_without_an_id_need_no_job() -> None:
    admission: Admission[str] = Admission()
    feishu = s.message("om_1", nodes=(CustomEmoji(alt="[FINGERHEART]", emoji_id="FINGERHEART"),))
    assert admission.admit(("feishu", "oc_chat"), feishu, "t1", now=0.0) == []
    plain = message("9", CustomEmoji(alt="🙂"))
    assert admission.admit(CHAT, plain, "t2", now=0.0) == []
    assert [p.token for p in admission.take_ready()] == ["t1", "t2"]


def test_a_feishu_sticker_needs_no_job_and_renders_from_its_message() -> None:
    """Feishu serves no sticker to a bot: a job would fail for good each time. The sticker still renders,
    self-closing, with its file-id; a Feishu video gets its frames job like a Telegram one."""
    admission: Admission[str] = Admission()
    sticker = Attachment(type=AttachmentType.STICKER, file_id="v3_00ab_sticker_0f1e")
    video = Attachment(type=AttachmentType.VIDEO, file_id="file_v3_video", name="demo.mp4", duration_s=12.3)
    event = s.message("om_1", attachments=(sticker, video))
    (job,) = admission.admit(("feishu", "oc_chat"), event, "t", now=0.0)
    assert (job.transform, job.attachment_index, job.attachment_type) == ("frames", 1, AttachmentType.VIDEO)
    projection = Projection(RenderParams(Platform.FEISHU, "oc_chat", deployment_utc_offset_min=480))
    projection.apply(event)
    (segment,) = projection.segments
    assert '<sticker file-id="om_1:0"/>' in segment.xml
