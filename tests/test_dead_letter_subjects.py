"""Dead-letter subjects follow one convention, wherever they are written and wherever they are documented:
``deadletter.<source>.<consumer>``, every token lower-case — the source is the stream a consumer read from
(``EVENTS`` → ``events``) or the platform an ingress read from."""

from __future__ import annotations

import re
from pathlib import Path

from larkbot.canonical.names import (
    CONSUMER_MEDIA,
    CONSUMER_PIPELINE,
    STREAM_EVENTS,
    STREAM_MEDIA,
    dead_letter_subject,
)
from larkbot.ingress_feishu.adapters import inbound as feishu_inbound
from larkbot.ingress_telegram.adapters import inbound as telegram_inbound

ROOT = Path(__file__).resolve().parents[1]

#: Every (source, consumer) pair the code writes dead letters for: the pipeline's intake (events, media
#: results), the runtime's consume loop under the media workers, and each ingress.
WRITTEN = {
    (STREAM_EVENTS, CONSUMER_PIPELINE): "deadletter.events.pipeline",
    (STREAM_MEDIA, CONSUMER_PIPELINE): "deadletter.media.pipeline",
    (STREAM_MEDIA, CONSUMER_MEDIA): "deadletter.media.media-workers",
    (feishu_inbound.DL_SOURCE, feishu_inbound.DL_CONSUMER): "deadletter.feishu.ingress-feishu",
    (telegram_inbound.DL_SOURCE, telegram_inbound.DL_CONSUMER): "deadletter.telegram.ingress-telegram",
}


def test_every_dead_letter_subject_is_spelled_one_way() -> None:
    for (source, consumer), subject in WRITTEN.items():
        assert dead_letter_subject(source, consumer) == subject


def test_the_docs_spell_dead_letter_subjects_as_the_code_writes_them() -> None:
    allowed = {*WRITTEN.values(), "deadletter.<source>.<consumer>"}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = 0
    for page in pages:
        for subject in re.findall(r"deadletter\.[A-Za-z0-9_<>.-]+[A-Za-z0-9>_-]", page.read_text("utf-8")):
            found += 1
            assert subject in allowed, f"{page.name}: {subject}"
    assert found >= len(WRITTEN)
