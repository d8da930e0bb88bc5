"""Golden tests: every real-payload fixture under ``fixtures/updates`` against its expected canonical
output under ``golden`` (events, a drop reason, or the refusal). Regenerate after a reviewed change with
``LARKBOT_UPDATE_GOLDEN=1``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from larkbot.canonical.errors import ContractError
from larkbot.canonical.events import EVENT_ADAPTER
from larkbot.ingress_telegram.core import TelegramAdapter

HERE = Path(__file__).parent
FIXTURES = sorted((HERE / "fixtures" / "updates").glob("*.json"))
BOT_ID = "7000000001"
RECEIVED_MS = 1767225601500


def outcome(update: dict[str, Any]) -> dict[str, Any]:
    adapter = TelegramAdapter(BOT_ID, None, 480)
    try:
        result = adapter.adapt(update, RECEIVED_MS)
    except ContractError as exc:
        return {"refused": type(exc).__name__, "reason": str(exc)}
    learnt = {"migration": list(result.migration)} if result.migration is not None else {}
    if result.dropped is not None:
        return {"update_id": result.update_id, "dropped": result.dropped, **learnt}
    return {
        "update_id": result.update_id,
        "events": [EVENT_ADAPTER.dump_python(e, mode="json", exclude_none=True) for e in result.events],
        **learnt,
    }


def test_every_fixture_has_a_golden_file() -> None:
    golden = {p.name for p in (HERE / "golden").glob("*.json")}
    assert {p.name for p in FIXTURES} <= golden or os.environ.get("LARKBOT_UPDATE_GOLDEN")
    assert len(FIXTURES) >= 110


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_golden(fixture: Path) -> None:
    got = outcome(json.loads(fixture.read_text(encoding="utf-8")))
    golden = HERE / "golden" / fixture.name
    if os.environ.get("LARKBOT_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    assert got == json.loads(golden.read_text(encoding="utf-8"))
