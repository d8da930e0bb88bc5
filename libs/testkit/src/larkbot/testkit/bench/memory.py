"""The memory-search benchmark of ``larkbot bench``: 100,000 memories of 1,000 people on SQLite, searched
through :meth:`MemoryStore.search` the way the ``memory_search`` tool does.

The data is synthetic and seeded: every person belongs to three of 100 group chats and has 100 memories
in English, Chinese or Japanese built from a shared vocabulary (so common terms match thousands of
memories, as in a real deployment); 85% are ``group`` memories of one of the person's chats, 10%
``private`` (learned in the direct chat), 5% ``global``; one in ten is ``high``. Queries are natural
sentences in the three languages, some naming nothing stored; 80% are asked from a group chat that allows
global memories, 20% from a direct chat; a third are restricted to one person. Each query asks for the
best 10.

The same store measures late binding: for windows of ten members of one chat, the high-importance
memories the wake-up loads (``MemoryStore.high_importance``) and the ``<memory>`` block they make with the
default bounds (20 memories, 2,000 characters): its size in characters and estimated tokens, and the
load's latency.
"""

from __future__ import annotations

import gc
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from larkbot.driver.app import MIGRATIONS
from larkbot.driver.memory.core.memory import Importance, NewMemory, Scope, Visibility
from larkbot.driver.memory.core.recall import RecallLimits, memory_block
from larkbot.driver.memory.memories import MemoryStore
from larkbot.driver.wake.core.estimate import text_tokens
from larkbot.runtime.db import create_engine, migrate

PEOPLE = 1_000
CHATS = 100
SEED = 20261201


def _words(text: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in text.split("|"))


_EN_LIKES = _words(
    "coffee | green tea | sushi | ramen | hiking | chess | jazz | cycling | the piano | python | rust |"
    "spicy food | board games | football | photography | cats | dogs | gardening | running | sci-fi novels |"
    "cooking | swimming | climbing | opera | tennis | mangoes"
)
_EN_FACTS = _words(
    "{n} likes {x} | {n} is allergic to {x} | {n} started learning {x} last year | {n} does not enjoy {x} |"
    "{n} talks about {x} every Friday | {n} wants to try {x} with the team | {n} works remotely on Mondays |"
    "{n} has a birthday in {m} | {n} moved to a new flat in {m} | {n} prefers {x} over {y}"
)
_ZH_LIKES = _words(
    "咖啡|绿茶|寿司|拉面|爬山|下棋|爵士乐|骑车|钢琴|编程|火锅|桌游|足球|摄影|猫|狗|园艺|跑步|科幻小说|做饭|游泳|攀岩|网球|芒果"
)
_ZH_FACTS = _words(
    "{n}喜欢{x}|{n}对{x}过敏|{n}去年开始学{x}|{n}不太喜欢{x}|{n}每周五都聊{x}|{n}想和大家一起{x}|{n}周一在家办公|"
    "{n}的生日在{m}|{n}比起{y}更喜欢{x}|{n}最近在研究{x}"
)
_JA_LIKES = _words(
    "コーヒー|緑茶|寿司|ラーメン|登山|将棋|ジャズ|自転車|ピアノ|プログラミング|辛い料理|ボードゲーム|サッカー|写真|猫|犬|"
    "ガーデニング|ランニング|料理|水泳"
)
_JA_FACTS = _words(
    "{n}は{x}が好き|{n}は{x}のアレルギーがある|{n}は去年から{x}を習っている|{n}は{x}があまり好きではない|"
    "{n}は毎週金曜日に{x}の話をする|{n}は月曜日に在宅勤務|{n}の誕生日は{m}|{n}は{y}より{x}が好き"
)
_MONTHS = _words("March | May | July | October | 三月 | 五月 | 七月 | 十月")
_QUERIES = _words(
    "does anyone like coffee | who is allergic to mangoes | what does she think about jazz |"
    "football on friday | piano lessons | who works remotely | birthday in may | quantum physics |"
    "谁喜欢喝咖啡 | 他对什么过敏 | 一起去爬山吗 | 科幻小说推荐 | 生日 | 量子力学 |"
    "寿司が好きな人 | 猫を飼っている | ピアノを習っている人は | 誕生日はいつ | 量子力学 |"
    "咖啡 | 寿司 | ramen | Chess | 猫"
)


def _content(rng: random.Random, name: str) -> str:
    language = rng.random()
    if language < 0.5:
        template, likes = rng.choice(_EN_FACTS), _EN_LIKES
    elif language < 0.8:
        template, likes = rng.choice(_ZH_FACTS), _ZH_LIKES
    else:
        template, likes = rng.choice(_JA_FACTS), _JA_LIKES
    x, y = rng.sample(likes, 2)
    return template.format(n=name, x=x, y=y, m=rng.choice(_MONTHS))


def dataset(memories: int, seed: int = SEED) -> list[NewMemory]:
    rng = random.Random(seed)
    per_person = max(1, memories // PEOPLE)
    out: list[NewMemory] = []
    for p in range(PEOPLE):
        person = f"ou_{p:04d}"
        name = rng.choice(("Alice", "Bob", "小明", "阿强", "さくら", "健太", "Dana", "李雷"))
        chats = rng.sample(range(CHATS), 3)
        for k in range(per_person):
            roll = rng.random()
            scope: Scope = "group" if roll < 0.85 else "private" if roll < 0.95 else "global"
            chat_id = f"dm_{person}" if scope == "private" else f"oc_{rng.choice(chats):03d}"
            importance: Importance = "high" if rng.random() < 0.1 else "normal"
            out.append(
                NewMemory(
                    platform="feishu",
                    person_id=person,
                    content=_content(rng, name),
                    evidence=(f"om_{p}_{k}",),
                    chat_id=chat_id,
                    scope=scope,
                    importance=importance,
                )
            )
            if len(out) == memories:
                return out
    return out


def _queries(count: int, seed: int = SEED) -> list[tuple[str, Visibility, str | None]]:
    rng = random.Random(seed + 1)
    out: list[tuple[str, Visibility, str | None]] = []
    for _ in range(count):
        person = f"ou_{rng.randrange(PEOPLE):04d}"
        if rng.random() < 0.8:
            visibility = Visibility("feishu", f"oc_{rng.randrange(CHATS):03d}", None, True)
        else:
            visibility = Visibility("feishu", f"dm_{person}", person, False)
        out.append((rng.choice(_QUERIES), visibility, person if rng.random() < 1 / 3 else None))
    return out


async def measure(quick: bool, *, directory: Path | None = None) -> dict[str, Any]:
    memories, queries = (5_000, 200) if quick else (100_000, 2_000)
    with tempfile.TemporaryDirectory(prefix="larkbot-memory-bench-", dir=directory) as tmp:
        engine = create_engine(f"sqlite+aiosqlite:///{Path(tmp) / 'driver.db'}")
        try:
            await migrate(engine, MIGRATIONS)
            store = MemoryStore(engine)
            data = dataset(memories)
            started = time.perf_counter()
            for i in range(0, len(data), 5_000):
                await store.save_many(data[i : i + 5_000], now_ms=1_800_000_000_000 + i)
            load_s = time.perf_counter() - started
            members: dict[str, set[str]] = {}
            for m in data:
                if m.scope == "group":
                    members.setdefault(m.chat_id, set()).add(m.person_id)
            # As a service started by `larkbot run` does with its start-up heap: what is left of the load
            # goes to the permanent generation, so collections during the searches do not walk it.
            del data
            gc.collect()
            gc.freeze()
            plan = _queries(queries)
            for query, visibility, person in plan[:20]:
                await store.search(query, visibility, person_id=person, limit=10)
            timings: list[float] = []
            found = 0
            for query, visibility, person in plan:
                t0 = time.perf_counter()
                results = await store.search(query, visibility, person_id=person, limit=10)
                timings.append((time.perf_counter() - t0) * 1000)
                found += len(results)
            late_binding = await _late_binding(store, members, queries // 4)
        finally:
            gc.unfreeze()
            await engine.dispose()
    timings.sort()
    return {
        "memory_search_ms": {
            "p50": round(statistics.median(timings), 2),
            "p99": round(timings[min(len(timings) - 1, int(len(timings) * 0.99))], 2),
        },
        "memory_search": {
            "memories": memories,
            "people": PEOPLE,
            "queries": queries,
            "mean_results": round(found / queries, 2),
            "max_ms": round(timings[-1], 2),
            "load_s": round(load_s, 2),
        },
        "memory_late_binding": late_binding,
    }


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 2)


async def _late_binding(
    store: MemoryStore, members: dict[str, set[str]], windows: int, seed: int = SEED
) -> dict[str, Any]:
    rng = random.Random(seed + 2)
    limits = RecallLimits(max_count=20, max_chars=2000)
    sizes: list[float] = []
    tokens: list[float] = []
    shown: list[float] = []
    timings: list[float] = []
    for _ in range(windows):
        chat = rng.choice(sorted(members))
        persons = tuple(rng.sample(sorted(members[chat]), min(10, len(members[chat]))))
        t0 = time.perf_counter()
        found = await store.high_importance(persons, Visibility("feishu", chat, None, True), limit=20)
        timings.append((time.perf_counter() - t0) * 1000)
        block = memory_block(found, limits) or ""
        sizes.append(len(block))
        tokens.append(text_tokens(block))
        shown.append(block.count("<fact "))
    return {
        "windows": windows,
        "people_per_window": 10,
        "block_chars": {"p50": _pct(sizes, 0.5), "max": max(sizes)},
        "block_est_tokens": {"p50": _pct(tokens, 0.5), "max": max(tokens)},
        "memories_shown_mean": round(statistics.fmean(shown), 2),
        "recall_ms": {"p50": _pct(timings, 0.5), "p99": _pct(timings, 0.99)},
    }
