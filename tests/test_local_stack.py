"""`larkbot up --playground` as an operator runs it: embedded NATS, six services healthy, metrics, a
conversation through the whole stack, clean Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from pathlib import Path

import aiohttp

from larkbot.canonical.names import SERVICE_PORTS

STARTUP_TIMEOUT_S = 180.0


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


async def test_larkbot_up_runs_the_stack_and_stops_cleanly(tmp_path: Path) -> None:
    services = [s.value for s in SERVICE_PORTS]
    *free, telegram_port, llm_port, control_port = _free_ports(len(services) + 3)
    ports = dict(zip(services, free, strict=True))
    config = tmp_path / "config.yaml"
    lines = ["services:"]
    for name, port in ports.items():
        lines.append(f"  {name.replace('-', '_')}: {{http_host: 127.0.0.1, http_port: {port}}}")
    lines += [
        "telegram:",
        '  bot_token: "7000000001:AAFakeTokenForTestsOnly_abcdefghijklmno"',
        f"  api_base: http://127.0.0.1:{telegram_port}",
        "  polling_timeout_s: 2",
        "llm:",
        "  endpoints:",
        f"    play: {{format: openai-chat, base_url: 'http://127.0.0.1:{llm_port}/v1', model: m,",
        "            fake: true}",
        "  probe: play",
        "  primary: play",
        "chats:",
        "  default: {initial_delay_ms: 200}",
        "  'telegram:-1000000000001': {}",
    ]
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "LARKBOT_CONFIG")}
    command = ["-m", "larkbot.cli", "up", "--config", str(config), "--data-dir", str(tmp_path / "data")]
    command += ["--playground", "--playground-port", str(control_port)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env
    )
    seen: list[str] = []
    try:
        assert proc.stdout is not None

        async def announced() -> None:
            assert proc.stdout is not None
            while line := (await proc.stdout.readline()).decode():
                seen.append(line)
                if "all 6 services ready (and the playground)" in line:
                    return
            raise AssertionError("larkbot up exited before announcing readiness:\n" + "".join(seen))

        try:
            await asyncio.wait_for(announced(), STARTUP_TIMEOUT_S)
        except TimeoutError:
            raise AssertionError("not ready in time:\n" + "".join(seen[-30:])) from None
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            for name, port in ports.items():
                # Ready was announced; a transient platform poll error may flip one check for a moment
                # (the body says which), so readiness is awaited, with a deadline, not sampled once.
                deadline = asyncio.get_running_loop().time() + 60
                while True:
                    async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                        if resp.status == 200:
                            break
                        body = await resp.text()
                    assert asyncio.get_running_loop().time() < deadline, f"{name} not ready: {body}"
                    await asyncio.sleep(0.2)
                async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
                    text = await resp.text()
                assert f'larkbot_service_info{{service="{name}"' in text
                assert re.search(rf'larkbot_bus_connected{{service="{name}"}} 1\.0', text)
        # A conversation through every service: fake Telegram → ingress → pipeline → driver → gateway →
        # fake model → driver → ingress → fake Telegram.
        say = [sys.executable, "-m", "larkbot.cli", "say", "hello @LarkBot, are you there?"]
        say += ["--control-port", str(control_port), "--wait", "90"]
        talk = await asyncio.create_subprocess_exec(*say, stdout=asyncio.subprocess.PIPE, env=env)
        answer, _ = await asyncio.wait_for(talk.communicate(), 120)
        assert talk.returncode == 0
        assert "bot: I read: “hello @LarkBot, are you there?”" in answer.decode()
        assert (tmp_path / "data" / "pipeline.db").exists()  # SQLite under the data dir
        assert (tmp_path / "data" / "nats" / "jetstream").is_dir()  # embedded NATS store
        proc.send_signal(signal.SIGINT)
        rest, _ = await asyncio.wait_for(proc.communicate(), 90)
        seen.append(rest.decode())
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = "".join(seen)
    assert proc.returncode == 0, text
    for name in [*services, "playground"]:
        assert re.search(rf"{name}\s+stopped \(status 0\)", text), text
    assert "nats-server       stopped" in text
