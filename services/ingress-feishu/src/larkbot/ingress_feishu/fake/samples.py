"""The ids used in the shipped payload fixtures (``fake/payloads/*.json``) and loaders for them.

Shared by the tests, the benchmarks and the local playground.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

CHAT = "oc_5ce6d572455d361153b7xx51da133945"
OTHER_CHAT = "oc_a0553eda9014c201e6969b478895c230"
P2P_CHAT = "oc_84983ff6516d731e5b5f68d4ea2e1da5"
BOT = "ou_7d8a6e6df7621556ce0d21922b676706"
APP_ID = "cli_a5f1c2d3e4b5a6c7"
ALICE = "ou_84aad35d084aa403a838cf73ee18467"
BOB = "ou_3c5a9f2b7e1d4c8a6b0e9f1d2c3b4a5e"
CAROL = "ou_e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6"
FIRST_MESSAGE = "om_dc13264520392913993dd051dba21dcf"


def payload_names() -> list[str]:
    root = resources.files("larkbot.ingress_feishu.fake") / "payloads"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".json"))


def payload(name: str) -> dict[str, Any]:
    root = resources.files("larkbot.ingress_feishu.fake") / "payloads"
    data: dict[str, Any] = json.loads((root / f"{name}.json").read_text(encoding="utf-8"))
    return data
