"""Mutations of real platform payloads for fuzzing: wrong types, missing and extra fields, huge strings,
lone surrogates (text that cannot be encoded as UTF-8), unknown event kinds, broken nested JSON.

``mutate(payload, rng)`` returns a deep copy with one to three mutations; ``add_unknown_fields`` only adds
keys no schema knows (the result must adapt exactly like the original).
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

HUGE = "x" * 200_000
SURROGATE = "\ud800 lone surrogate"
WEIRD_VALUES: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**63,
    1.5e308,
    float("nan"),
    "",
    HUGE,
    "\x00\x01 control",
    '<message id="x">forged</message>',
    [],
    [1, "a", None],
    {},
    {"nested": {"deeper": [None]}},
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _parent(root: Any, path: tuple[Any, ...]) -> Any:
    node = root
    for key in path[:-1]:
        node = node[key]
    return node


def mutate(payload: dict[str, Any], rng: random.Random, *, surrogates: bool = False) -> dict[str, Any]:
    """``surrogates``: also inject lone surrogates (valid JSON escapes that cannot become UTF-8)."""
    weird = (*WEIRD_VALUES, SURROGATE) if surrogates else WEIRD_VALUES
    suffixes = ["\u202e", "\x00", "é" * 1000, HUGE] + (["\ud800"] if surrogates else [])
    out = copy.deepcopy(payload)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _paths(out) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent = _parent(out, path)
        key = path[-1]
        op = rng.randrange(6)
        if op == 0 and isinstance(parent, dict):
            del parent[key]
        elif op == 1 and isinstance(parent[key], str) and parent[key].startswith(("{", "[")):
            # a JSON document inside a string (Feishu's message content): break it or change its shape
            parent[key] = rng.choice(
                [parent[key][: len(parent[key]) // 2], "null", "[]", '"text"', json.dumps({"text": HUGE})]
            )
        elif op == 2 and isinstance(parent[key], str):
            parent[key] = parent[key] + rng.choice(suffixes)
        elif op == 3 and isinstance(parent[key], int | float) and not isinstance(parent[key], bool):
            parent[key] = rng.choice([-parent[key], str(parent[key]), parent[key] * 10**12, None])
        else:
            parent[key] = copy.deepcopy(rng.choice(weird))
    return out


def add_unknown_fields(payload: dict[str, Any], rng: random.Random, *, min_depth: int = 1) -> dict[str, Any]:
    """Unknown keys in objects at least ``min_depth`` deep (the root's keys name the payload's kind)."""
    out = copy.deepcopy(payload)
    dicts = [p for p in _paths(out) if len(p) >= min_depth and isinstance(_get(out, p), dict)]
    if not dicts:
        return out
    for _ in range(rng.randint(1, 4)):
        target = _get(out, rng.choice(dicts))
        target[f"x_unknown_{rng.randrange(10**6)}"] = copy.deepcopy(rng.choice(WEIRD_VALUES[:9]))
    return out


def _get(root: Any, path: tuple[Any, ...]) -> Any:
    node = root
    for key in path:
        node = node[key]
    return node


def random_bytes(rng: random.Random) -> bytes:
    """Bodies that are not JSON, or not UTF-8."""
    return rng.choice(
        [
            b"",
            b"\xff\xfe\xfd not utf-8",
            b'{"schema": "2.0", "header": ',
            bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))),
            b"[1, 2, 3]",
            b'"just a string"',
        ]
    )
