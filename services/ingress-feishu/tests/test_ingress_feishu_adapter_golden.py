"""Golden tests: every real-shaped payload fixture → canonical events (or a drop / lookup / error).

Regenerate after a deliberate change with ``UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from larkbot.canonical.codec import encode
from larkbot.canonical.errors import ContractError
from larkbot.ingress_feishu.core import Adapted, Dropped, FeishuAdapter, NeedsChat
from larkbot.ingress_feishu.fake.samples import ALICE, APP_ID, BOT, CHAT, P2P_CHAT, payload, payload_names

GOLDEN = Path(__file__).parent / "golden"
RECEIVED_AT_MS = 1_715_000_000_999


def _adapter() -> FeishuAdapter:
    # The group and Alice's direct chat with the bot are configured; OTHER_CHAT is not.
    adapter = FeishuAdapter(
        BOT, frozenset({CHAT, P2P_CHAT}), 480, bot_app_id=APP_ID, direct_chats={P2P_CHAT: ALICE}
    )
    adapter.remember("om_dc13264520392913993dd051dba21dcf", CHAT)
    return adapter


def _outcome(name: str) -> dict[str, Any]:
    try:
        result = _adapter().adapt(payload(name), RECEIVED_AT_MS, {ALICE: "Alice Wang"})
    except ContractError as exc:
        return {"error": type(exc).__name__, "message": str(exc)}
    if isinstance(result, Adapted):
        shared = {"chat_ids": list(result.chat_ids)} if result.chat_ids else {}
        return {
            "events": [json.loads(encode(e)) for e in result.events],
            "user_ids": list(result.user_ids),
            "seen_names": [list(p) for p in result.seen_names],
            **shared,
        }
    if isinstance(result, Dropped):
        return {"dropped": result.reason, "chat_id": result.chat_id}
    assert isinstance(result, NeedsChat)
    return {"needs_chat": result.message_id}


@pytest.mark.parametrize("name", payload_names())
def test_payload_matches_golden(name: str) -> None:
    outcome = _outcome(name)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(json.dumps(outcome, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    assert outcome == json.loads(path.read_text(encoding="utf-8"))
