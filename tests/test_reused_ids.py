"""A message id reused for other content reaches the pipeline and is reported there as a conflict (log,
metric, dead-letter record) — neither the ingress's dedup nor JetStream's duplicate window swallows it —
while a true re-push of the same event stays a silent duplicate.

ingress-feishu (webhook mode) and the pipeline in-process, the fake Feishu, a real JetStream, SQLite.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import REGISTRY

from larkbot.canonical.codec import decode_as
from larkbot.canonical.context import ContextSnapshot, SnapshotRequest
from larkbot.canonical.events import EVENT_ADAPTER, MessageEvent
from larkbot.canonical.names import (
    STREAM_DEAD_LETTER,
    STREAM_EVENTS,
    SUBJECT_PIPELINE_SNAPSHOT,
    Platform,
    Service,
)
from larkbot.ingress_feishu.app import FeishuOptions, IngressFeishuService
from larkbot.ingress_feishu.fake.samples import CHAT, payload
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.pipeline.app import PipelineOptions, PipelineService
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import parse_config
from larkbot.runtime.service import built
from larkbot.testkit.ingress_feishu.service import webhook_url
from larkbot.testkit.stack import until


def pipeline_events(outcome: str) -> float:
    labels = {"kind": "message", "outcome": outcome}
    return REGISTRY.get_sample_value("larkbot_pipeline_events_total", labels) or 0.0


def text_message(event_id: str, text: str) -> dict[str, Any]:
    data = copy.deepcopy(payload("message_text"))
    data["header"]["event_id"] = event_id
    data["event"]["message"]["content"] = json.dumps({"text": text})
    data["event"]["message"]["mentions"] = []
    return data


async def test_a_reused_message_id_is_a_reported_conflict_and_a_re_push_a_silent_duplicate(
    bus: Bus, nats_url: str, tmp_path: Path
) -> None:
    async with FakeFeishu() as fake:
        section = {
            "app_id": fake.app_id,
            "app_secret": fake.app_secret,
            "domain": fake.url,
            "mode": "webhook",
        }
        config = parse_config(
            {
                "feishu": section,
                "utc_offset_min": 480,
                "services": {"pipeline": {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'p.db'}"}},
                "chats": {f"feishu:{CHAT}": {}},
            },
            env={},
        )
        ingress = IngressFeishuService(config, FeishuOptions(webhook_host="127.0.0.1", webhook_port=0))
        pipeline = PipelineService(config, PipelineOptions(media_enabled=False))
        duplicates, conflicts = pipeline_events("duplicate"), pipeline_events("conflict")
        async with (
            built(Service.PIPELINE, pipeline, config, nats_url=nats_url) as piped,
            built(Service.INGRESS_FEISHU, ingress, config, nats_url=nats_url) as feishu,
        ):
            url = webhook_url(feishu)
            original = text_message("e1" * 16, "lunch at noon?")
            reused = text_message("e2" * 16, "something else entirely")  # same message id
            async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
                for body in (original, reused, original):  # the last: Feishu's re-push of the first
                    assert (await http.post(url, json=body)).status_code == 200
            stored = (await bus.js.stream_info(STREAM_EVENTS)).state.messages
            assert stored == 2  # the re-push absorbed at the ingress, the reuse passed on
            intake = piped.components.intake
            await until(lambda: intake.handled >= stored, "the pipeline to take both events")
            request = SnapshotRequest(platform=Platform.FEISHU, chat_id=CHAT)
            snap = await bus.request(SUBJECT_PIPELINE_SNAPSHOT, request, ContextSnapshot, timeout_s=30)
        xml = "".join(seg.xml for seg in snap.segments)
        assert "lunch at noon?" in xml
        assert "something else" not in xml
        assert (pipeline_events("duplicate"), pipeline_events("conflict")) == (duplicates, conflicts + 1)
        info = await bus.js.stream_info(STREAM_DEAD_LETTER)
        assert info.state.messages == 1
        record = await bus.js.get_msg(STREAM_DEAD_LETTER, info.state.last_seq)
        assert (record.headers or {})["Larkbot-Dead-Letter-Reason"] == "conflict"
        kept = decode_as(record.data or b"", EVENT_ADAPTER)
        assert isinstance(kept, MessageEvent)
        assert kept.event_id == "e2" * 16
