"""`larkbot up` keeps a stack's files where the configuration says, and one stack owns its data directory
and its ports: a second one is refused before it starts anything, with a message naming the first."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path

from larkbot.testkit.stack import free_port

TIMEOUT_S = 120.0
DECLARED = "streams, consumers and buckets declared"


def _config(root: Path, port: int, data_dir: str) -> Path:
    config = root / "config.yaml"
    config.write_text(
        f"data_dir: {data_dir}\nservices:\n  llm_gateway: {{http_port: {port}}}\n", encoding="utf-8"
    )
    return config


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "NATS_URL" and not k.startswith("LARKBOT_")}


async def _start(cwd: Path, *args: str, until: str = DECLARED) -> tuple[asyncio.subprocess.Process, str]:
    """`larkbot up --service llm-gateway …` until it prints ``until``: by default, that the bus is declared
    (its signal handlers are set by then)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "larkbot.cli", "up", "--service", "llm-gateway", *args,
        cwd=cwd, env=_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdout is not None
    seen: list[str] = []

    async def declared() -> None:
        assert proc.stdout is not None
        while line := (await proc.stdout.readline()).decode():
            seen.append(line)
            if until in line:
                return
        raise AssertionError("larkbot up exited early:\n" + "".join(seen))

    try:
        await asyncio.wait_for(declared(), TIMEOUT_S)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    return proc, "".join(seen)


async def _interrupt(proc: asyncio.subprocess.Process) -> str:
    proc.send_signal(signal.SIGINT)
    rest, _ = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)
    assert proc.returncode == 0, rest.decode()
    return rest.decode()


async def _refused(cwd: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "larkbot.cli", "up", "--service", "llm-gateway", *args,
        cwd=cwd, env=_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)
    except TimeoutError:
        proc.send_signal(signal.SIGINT)
        out, err = await proc.communicate()
        raise AssertionError(
            f"`larkbot up {' '.join(args)}` did not refuse:\n{(out + err).decode()}"
        ) from None
    assert proc.returncode == 1, (out + err).decode()
    assert DECLARED not in out.decode()
    return err.decode()


async def test_the_data_dir_comes_from_the_configuration_unless_the_flag_is_given(tmp_path: Path) -> None:
    config = _config(tmp_path, free_port(), "from-config")
    for flag, data in (
        ((), tmp_path / "from-config"),
        (("--data-dir", str(tmp_path / "from-flag")), tmp_path / "from-flag"),
    ):
        proc, out = await _start(tmp_path, "--config", str(config), *flag)
        await _interrupt(proc)
        assert f"store {data / 'nats'})" in out
        assert (data / "nats" / "jetstream").is_dir()
        assert (data / "logs" / "llm-gateway.log").exists()
    assert not (tmp_path / "data").exists()


async def test_a_second_stack_on_the_same_data_dir_or_ports_is_refused(tmp_path: Path) -> None:
    port = free_port()
    config = _config(tmp_path, port, "data")
    # Ready: the service listens on its port.
    first, _ = await _start(tmp_path, "--config", str(config), until="all 1 services ready")
    try:
        holder = json.loads((tmp_path / "data" / "larkbot-up.lock").read_text(encoding="utf-8"))
        err = await _refused(tmp_path, "--config", str(config))
        assert f"the data directory {tmp_path / 'data'} is in use by another `larkbot up`" in err
        assert f"pid {first.pid}" in err
        assert f"configuration {config}" in err
        assert f"NATS {holder['nats_url']}" in err
        # Another data directory, the same ports: refused before NATS starts, naming what is taken.
        err = await _refused(tmp_path, "--config", str(config), "--data-dir", str(tmp_path / "other"))
        assert f"llm-gateway on 127.0.0.1:{port}: port {port} is in use by another process" in err
        assert not (tmp_path / "other" / "nats").exists()
    finally:
        await _interrupt(first)
    # Stopped cleanly: the directory is free again.
    again, _ = await _start(tmp_path, "--config", str(config))
    await _interrupt(again)


async def test_a_port_taken_by_anything_is_reported_before_starting(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        config = _config(tmp_path, port, "data")
        err = await _refused(tmp_path, "--config", str(config))
    assert f"llm-gateway on 127.0.0.1:{port}: port {port} is in use by another process" in err
    assert not (tmp_path / "data" / "nats").exists()
