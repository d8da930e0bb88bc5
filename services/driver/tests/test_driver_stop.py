"""A driver stops without waiting for its periodic loops: the audit sweep, the shell-task watcher and
memory maintenance end when the service stops, rather than being cancelled after the stop's grace period
(which held every SIGTERM up by 5 s)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from larkbot.canonical.names import Service
from larkbot.driver.app import DriverOptions, DriverService
from larkbot.runtime.bus import Bus
from larkbot.runtime.service import built
from larkbot.testkit.driver.harness import world

CANCELLED = "did not end with the service"


async def test_every_periodic_loop_ends_with_the_service(
    bus: Bus, nats_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
    shell = {"output_dir": str(tmp_path / "tasks"), "working_dir": str(tmp_path / "work")}
    caplog.set_level(logging.WARNING, logger="larkbot.runtime.service")
    async with world(bus, nats_url, db, shell=shell, maintainers=("ou_alice",), shell_enabled=True) as w:
        config = w.config
        assert config.audit.enabled
        # A second replica as production runs it: with memory maintenance.
        replica = DriverService(config, DriverOptions(clock=w.clock, replica="b", memory_maintenance=True))
        async with built(Service.DRIVER, replica, config, nats_url=nats_url):
            names = {task.get_name() for task in asyncio.all_tasks()}
    # The singleton work runs under its lease (ServiceContext.lead names the task after it).
    assert {"lease-audit-retention", "shell-tasks", "lease-memory-maintenance"} <= names  # they ran
    assert CANCELLED not in caplog.text
