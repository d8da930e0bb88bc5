"""The README's commands, verbatim, on a fresh copy of the repository.

The copy holds what a clone holds (tracked and unignored files: no `.venv`, no `data/`), with
`config/local.yaml` moved to free ports so the run can share the machine. `make up` installs and brings the
stack up (embedded NATS, six services, the playground); while it runs, every other command of the README is
run as shown — the `say` line gets the bot's reply — and then what an operator checks: each service ready
with its metrics, the bot's silence reported with its reason, a second `make up` refused with a message
naming the first. Ctrl-C stops everything cleanly. `make test` is the one command not run: it is this suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from larkbot.canonical.names import SERVICE_PORTS
from larkbot.testkit.stack import free_port

ROOT = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 360.0  # includes installing the workspace into the copy's .venv
COMMAND_TIMEOUT_S = 120.0
READY = "all 6 services ready (and the playground)"
MAKE_UP = ["make", "up"]
NOT_RUN = [["make", "test"]]  # this suite itself


def readme_commands() -> list[str]:
    """Every command line of the README's ``sh`` blocks, as shown (a trailing comment is the shell's)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```sh\n(.*?)^```", readme, re.S | re.M)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def words(line: str) -> list[str]:
    return shlex.split(line, comments=True)


def fresh_copy(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not part of it
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    # No network in a test: uv is the one this checkout installed (`.tools/`, as `make` does when uv is not
    # on the PATH) or the one on the PATH; the workspace comes from uv's cache.
    if (ROOT / ".tools" / "bin" / "uv").exists():
        (dest / ".tools").symlink_to(ROOT / ".tools")


def move_to_free_ports(config_path: Path) -> dict[str, int]:
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    ports = {service.value: free_port() for service in SERVICE_PORTS}
    config["services"] = {name.replace("-", "_"): {"http_port": port} for name, port in ports.items()}
    telegram, llm = free_port(), free_port()
    config["inspector"] = {"port": free_port()}
    config["telegram"]["api_base"] = re.sub(r":\d+$", f":{telegram}", config["telegram"]["api_base"])
    for endpoint in config["llm"]["endpoints"].values():
        endpoint["base_url"] = re.sub(r":\d+/", f":{llm}/", endpoint["base_url"])
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return ports


def clean_env(control_port: int) -> dict[str, str]:
    drop = ("NATS_URL", "VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("LARKBOT_")}
    env["LARKBOT_PLAYGROUND_PORT"] = str(control_port)
    return env


async def shell(line: str, cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", line, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), COMMAND_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        raise AssertionError(f"`{line}` did not finish:\n{(out + err).decode()}") from None
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def kill_leftovers(lock: Path, clone: Path) -> None:
    """After a failed run: the stack's own processes, by the pids its lock file names, and any other
    process still running from the clone (a child the stack restarted after writing its lock, or one
    left when the lock was already gone): seen left running for hours after a timed-out run."""
    pids: set[int] = set()
    with contextlib.suppress(FileNotFoundError, ValueError):
        holder: dict[str, Any] = json.loads(lock.read_text(encoding="utf-8"))
        pids |= {
            p for p in [holder.get("pid"), *(holder.get("children") or {}).values()] if isinstance(p, int)
        }
    marker = str(clone).encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker in (proc / "cmdline").read_bytes():
                    pids.add(int(proc.name))
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def check_operations(ports: dict[str, int]) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        for name, port in ports.items():
            # Ready was announced; a transient platform poll error may flip one check for a moment (the
            # body says which), so readiness is awaited with a deadline, not sampled once.
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
            assert f'larkbot_service_info{{component="{name}"' in text
            assert re.search(rf'larkbot_bus_connected{{component="{name}"}} 1\.0', text)


@pytest.mark.timeout(900)
async def test_the_readme_commands_work_verbatim_on_a_fresh_copy(tmp_path: Path) -> None:
    commands = readme_commands()
    assert [words(c) for c in commands].count(MAKE_UP) == 1
    say = next(c for c in commands if "say" in words(c))
    others = [c for c in commands if words(c) != MAKE_UP and words(c) not in NOT_RUN]
    clone = tmp_path / "larkbot"
    fresh_copy(clone)
    ports = move_to_free_ports(clone / "config" / "local.yaml")
    control = free_port()
    env = clean_env(control)
    lock = clone / "data" / "larkbot-up.lock"
    up = await asyncio.create_subprocess_exec(
        "bash", "-c", "make up", cwd=clone, env=env, start_new_session=True,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    seen: list[str] = []
    ran: list[str] = []
    try:
        assert up.stdout is not None

        async def announced() -> None:
            assert up.stdout is not None
            while line := (await up.stdout.readline()).decode():
                seen.append(line)
                if READY in line:
                    return
            raise AssertionError("make up exited before announcing readiness:\n" + "".join(seen))

        try:
            await asyncio.wait_for(announced(), STARTUP_TIMEOUT_S)
        except TimeoutError:
            raise AssertionError("not ready in time:\n" + "".join(seen[-40:])) from None
        # The banner shows the README's say line (with the control port this run moved).
        banner = (await asyncio.wait_for(up.stdout.readline(), 10)).decode()
        seen.append(banner)
        assert banner.startswith("talk to the bot:  "), banner
        assert words(banner.removeprefix("talk to the bot:  ")) == [
            *words(say),
            "--control-port",
            str(control),
        ]

        for line in others:
            status, out, err = await shell(line, clone, env)
            ran.append(line)
            assert status == 0, f"`{line}` failed ({status}):\n{out}{err}"
            if line == say:
                assert "bot: I read: “hello @LarkBot, what is new?”" in out, out + err
        assert sorted(words(c) for c in [*ran, "make up", "make test"]) == sorted(words(c) for c in commands)

        await check_operations(ports)
        # Silence is a decision, reported with its reason at once — not after --wait runs out.
        status, out, err = await shell(
            '.venv/bin/larkbot say "just chatting among ourselves" --wait 100', clone, env
        )
        assert status == 0, out + err
        assert "(the bot chose silence — reason: not mentioned and not asked a question)" in out
        # A second stack on the same data directory is refused, naming the first.
        holder = json.loads(lock.read_text(encoding="utf-8"))
        status, out, err = await shell("make up", clone, env)
        assert status != 0
        assert f"is in use by another `larkbot up` (pid {holder['pid']}" in err, out + err
        assert f"NATS {holder['nats_url']}" in err
        assert READY not in out

        assert (clone / "data" / "pipeline.db").exists()  # SQLite under the data dir
        assert (clone / "data" / "nats" / "jetstream").is_dir()  # embedded NATS store
        os.killpg(up.pid, signal.SIGINT)  # Ctrl-C in the terminal of `make up`
        rest, _ = await asyncio.wait_for(up.communicate(), 120)
        seen.append(rest.decode())
    finally:
        if up.returncode is None:
            kill_leftovers(lock, clone)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(up.pid, signal.SIGKILL)
            await up.wait()
    text = "".join(seen)
    for name in [*ports, "playground"]:
        assert re.search(rf"{name}\s+stopped \(status 0\)", text), text
    assert "nats-server       stopped" in text
