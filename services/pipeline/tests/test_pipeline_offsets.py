"""Resume points, abandoning a partition's queue, and segment construction (pure)."""

from __future__ import annotations

from larkbot.canonical.codec import encode
from larkbot.canonical.content import AttachmentType
from larkbot.canonical.context import AttachmentRef, Segment
from larkbot.canonical.llm import ImagePart
from larkbot.pipeline.core.admission import Admission
from larkbot.pipeline.core.offsets import Ticket, resume_points
from larkbot.pipeline.core.segments import new_segment
from larkbot.testkit.pipeline import synthetic as s

A, B, C = ("feishu", "oc_a"), ("feishu", "oc_b"), ("feishu", "oc_c")


def test_resume_point_is_the_oldest_waiting_event_else_one_past_the_last_read() -> None:
    waiting = [Ticket(3, 17, b""), Ticket(3, 12, b""), Ticket(5, 40, b"")]
    assert resume_points({3: 30, 5: 44, 7: 9}, waiting) == {3: 12, 5: 40, 7: 10}
    assert resume_points({3: 30}, []) == {3: 31}
    assert resume_points({}, []) == {}


def test_commits_behind_a_waiting_head_do_not_move_the_resume_point() -> None:
    admission: Admission[Ticket] = Admission()
    admission.admit(A, s.message("om_1", attachments=(s.photo(),), chat="oc_a"), Ticket(0, 10, b""), now=0.0)
    admission.admit(A, s.message("om_2", chat="oc_a"), Ticket(0, 11, b""), now=0.0)
    admission.admit(B, s.message("om_3", chat="oc_b"), Ticket(0, 12, b""), now=0.0)
    assert [p.token.stream_seq for p in admission.take_ready()] == [12]
    tickets = [p.token for p in admission.waiting()]
    assert resume_points({0: 12}, tickets) == {0: 10}


def test_dropping_a_partition_abandons_whole_chats_and_forgets_their_jobs() -> None:
    admission: Admission[Ticket] = Admission()
    (job,) = admission.admit(
        A, s.message("om_1", attachments=(s.photo(),), chat="oc_a"), Ticket(1, 1, b""), now=0.0
    )
    admission.admit(A, s.message("om_2", chat="oc_a"), Ticket(1, 2, b""), now=0.0)
    admission.admit(C, s.message("om_3", attachments=(s.photo(),), chat="oc_c"), Ticket(2, 3, b""), now=0.0)
    dropped = admission.drop(lambda ticket: ticket.partition == 1)
    assert [p.token.stream_seq for p in dropped] == [1, 2]
    assert list(admission.lanes) == [C]
    assert admission.find(A, "om_1") is None
    assert admission.due(now=1e9) == [j for p in admission.waiting() for j in p.jobs.values()]
    assert job not in admission.due(now=2e9)


def test_fast_segments_equal_constructed_ones() -> None:
    fields = {
        "segment_id": "msg:om_1",
        "node_type": "message",
        "event_seq": 3,
        "xml": "<message/>",
        "image_parts": (ImagePart(blob_key="k", mime="image/webp"),),
        "received_at_ms": 1,
        "timestamp_sec": 2.5,
        "sender_id": "ou_a",
        "message_id": "om_1",
        "is_myself": False,
        "is_self_sent": True,
        "is_bot": False,
        "is_deleted": False,
        "is_forwarded": True,
        "reply_to_message_id": "om_0",
        "mentions_me": True,
        "replies_to_me": False,
        "attachments": (
            AttachmentRef(index=0, type=AttachmentType.PHOTO, file_id="img_1", mime="image/png"),
        ),
    }
    fast, slow = new_segment(**fields), Segment.model_construct(**fields)  # type: ignore[arg-type]
    assert fast == slow
    assert hash(fast) == hash(slow)
    assert encode(fast) == encode(slow)
    assert Segment.model_validate_json(encode(fast)) == fast
    assert fast.model_fields_set == slow.model_fields_set
