"""Framework overhead per turn (DESIGN §8), measured on the real services as processes.

Set-up: the services of a Telegram turn as child processes on the given NATS, SQLite in a temporary
directory, the fake Telegram Bot API and the fake model in this process, debounce 0, a model that answers
instantly. One turn: a user message mentioning the bot (each turn in a group of its own) → probe
(``decide: send_message``) → primary (``send_message``) → ``sendMessage`` at the fake platform. Every
instant is read from the same monotonic clock:

- ``t_in``: the update is handed to the fake Bot API (the ingress's long poll is waiting for it);
- ``probe_call`` / ``probe_done``, ``primary_call`` / ``primary_done``: the fake model's script is entered /
  returns (time inside the fake model is the provider's, not ours);
- ``t_send``: ``sendMessage`` reaches the fake platform.

Hops: ``inbound_to_probe`` = probe_call − t_in (ingress, pipeline, driver wake-up, gateway);
``probe_to_primary`` = primary_call − probe_done; ``reply_to_send`` = t_send − primary_done.
Overhead = the sum of the three hops. Turns are spaced ``TURN_SPACING_S`` apart (after the previous
send) so that the ingress's global send pacing is not counted.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from .profile import ENV_PROFILE
from .profile import RATE as PROFILE_RATE
from .progress import note

SERVICES = ("ingress-telegram", "pipeline", "driver", "llm-gateway")
#: Each turn happens in its own group, so the platform's pacing (Telegram: ≤ 1 message/s per chat) is
#: not part of the figure: it is a rate limit, not overhead.
CHAT_BASE = -1000000000000
#: Telegram also allows only ~30 messages/s over all chats, and the ingress paces its sends to that
#: (``ingress_telegram.core.pacing``): turns sent back to back had each ``sendMessage`` wait for a slot
#: 33 ms after the previous one, which then made up most of the figure. Each turn therefore starts this
#: long after the previous send, which also lets the previous turn's tail (its closing model call, the
#: self-sent event through the pipeline) settle: the figure is one turn's latency, not a load test.
TURN_SPACING_S = 0.1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(nats_url: str, quick: bool) -> dict[str, Any]:
    from larkbot.ingress_telegram.fake import FakeBotApi
    from larkbot.llm_gateway.fake import FakeProvider, Reply

    turns = 15 if quick else 100
    marks: list[dict[str, float]] = []

    def script(call: Any) -> Any:
        entered = time.monotonic()
        names = {tool.name for tool in call.request.tools}
        mark = marks[-1] if marks else {}
        if "decide" in names:
            mark.setdefault("probe_call", entered)
            reply = Reply.tool_call("decide", {"should_act": "send_message", "reason": "mentioned"})
            mark["probe_done"] = time.monotonic()
        elif "send_message" in names and "primary_call" not in mark:
            mark["primary_call"] = entered
            reply = Reply.tool_call("send_message", {"text": f"reply {len(marks)}"})
            mark["primary_done"] = time.monotonic()
        else:
            reply = Reply.tool_call("end_turn", {}) if "end_turn" in names else Reply.text("")
        return reply

    telegram = FakeBotApi()
    await telegram.start()
    async with FakeProvider(script) as llm, aiohttp.ClientSession() as http:
        with tempfile.TemporaryDirectory(prefix="larkbot-turnbench-") as tmp:
            root = Path(tmp)
            ports = {name: _free_port() for name in SERVICES}
            config = {
                "data_dir": str(root / "data"),
                "services": {
                    n.replace("-", "_"): {"http_host": "127.0.0.1", "http_port": p} for n, p in ports.items()
                },
                "telegram": {
                    "bot_token": telegram.token,
                    "api_base": telegram.base_url,
                    "polling_timeout_s": 10,
                },
                "llm": {
                    "endpoints": {
                        "bench": {"format": "openai-chat", "base_url": llm.url, "model": "m", "fake": True}
                    },
                    "probe": "bench",
                    "primary": "bench",
                },
                "chats": {
                    "default": {"initial_delay_ms": 0},
                    **{f"telegram:{CHAT_BASE - n}": {} for n in range(turns + 3)},
                },
            }
            (root / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
            env = {k: v for k, v in os.environ.items() if not k.startswith("LARKBOT_")}
            env.update(NATS_URL=nats_url, LARKBOT_CONFIG=str(root / "config.yaml"))
            procs = []
            spies = []
            profiles = os.environ.get(ENV_PROFILE)
            try:
                for name in SERVICES:
                    log = (root / f"{name}.log").open("ab")
                    procs.append(
                        await asyncio.create_subprocess_exec(
                            *(sys.executable, "-m", "larkbot.cli", "run", name),
                            stdout=log,
                            stderr=asyncio.subprocess.STDOUT,
                            env=env,
                        )
                    )
                    log.close()
                await _wait_ready(http, ports)
                if profiles:
                    # Attached once the services are ready: start-up (imports, schemas) is not the turn's.
                    for name, proc in zip(SERVICES, procs, strict=True):
                        spies.append(await _spy(proc.pid, Path(profiles) / f"{name}.txt"))
                # This process plays the platform and the model: its own collector pauses (measured: up
                # to 20 ms) are not the framework's. The services freeze their start-up heap themselves.
                gc.collect()
                gc.disable()
                for n in range(turns + 3):  # the first turns warm caches and connections
                    if marks:
                        await asyncio.sleep(max(0.0, marks[-1]["t_send"] + TURN_SPACING_S - time.monotonic()))
                    before = len(telegram.sent)
                    marks.append({"t_in": time.monotonic()})
                    telegram.enqueue(_message(n, f"@{telegram.bot_username} question {n}?"))
                    await _wait_for(lambda before=before: len(telegram.sent) > before, 60)
                    sends = [r.at for r in telegram.requests if r.method == "sendMessage"]
                    marks[-1]["t_send"] = sends[-1]
                    if (n + 1) % 25 == 0:
                        note(f"{n + 1}/{turns + 3} turns")
            except TimeoutError as exc:
                tails = {name: _tail(root / f"{name}.log") for name in SERVICES}
                raise TimeoutError(f"{exc}; service logs: {tails}") from None
            finally:
                gc.enable()
                for proc in procs:
                    if proc.returncode is None:
                        proc.send_signal(signal.SIGTERM)
                for proc in procs:
                    await asyncio.wait_for(proc.wait(), 60)
                # Each profiler writes its profile when its process has exited.
                for spy in spies:
                    await asyncio.wait_for(spy.wait(), 120)
    await telegram.stop()
    measured = marks[3:]
    hops = {
        "inbound_to_probe": [m["probe_call"] - m["t_in"] for m in measured],
        "probe_to_primary": [m["primary_call"] - m["probe_done"] for m in measured],
        "reply_to_send": [m["t_send"] - m["primary_done"] for m in measured],
    }
    total = [sum(h[i] for h in hops.values()) * 1000 for i in range(len(measured))]
    return {
        "turn_overhead_ms": {"p50": round(_quantile(total, 0.5), 2), "p99": round(_quantile(total, 0.99), 2)},
        "turn_overhead_hops_ms": {
            name: {
                "p50": round(_quantile([v * 1000 for v in values], 0.5), 2),
                "p99": round(_quantile([v * 1000 for v in values], 0.99), 2),
                "mean": round(statistics.fmean(values) * 1000, 2),
            }
            for name, values in hops.items()
        },
        "turn_overhead_turns": len(measured),
        "turn_overhead_spacing_s": TURN_SPACING_S,
    }


async def _spy(pid: int, out: Path) -> asyncio.subprocess.Process:
    """py-spy sampling ``pid`` until it exits (``make profile``, :mod:`.profile`)."""
    command = [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid), "--format", "raw"]
    command += ["--rate", str(PROFILE_RATE), "--nonblocking", "-o", str(out)]
    return await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )


def _tail(path: Path, lines: int = 15) -> str:
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def _message(n: int, text: str) -> dict[str, Any]:
    return {
        "message": {
            "message_id": 700_000 + n,  # far from the ids the fake assigns to the bot's own sends
            "from": {"id": 4242, "is_bot": False, "first_name": "Bench"},
            "chat": {"id": CHAT_BASE - n, "type": "supergroup", "title": f"bench {n}"},
            "date": int(time.time()),
            "text": text,
            "entities": [{"type": "mention", "offset": 0, "length": text.index(" ")}],
        }
    }


async def _wait_ready(http: aiohttp.ClientSession, ports: dict[str, int], timeout_s: float = 120) -> None:
    waiting: dict[str, str] = {}

    async def ready() -> bool:
        waiting.clear()
        for name, port in ports.items():
            try:
                async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                    if resp.status != 200:
                        waiting[name] = await resp.text()
            except aiohttp.ClientError as exc:
                waiting[name] = type(exc).__name__
        return not waiting

    try:
        await _wait_for(ready, timeout_s)
    except TimeoutError:
        raise TimeoutError(f"services not ready: {waiting}") from None


async def _wait_for(predicate: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the turn did not complete in time")
        await asyncio.sleep(0.001)
