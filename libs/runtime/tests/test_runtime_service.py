"""A service run in-process: operations endpoint, readiness, metrics, clean stop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import aiohttp
import pytest

from larkbot.canonical.names import Service
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.http import Check
from larkbot.runtime.service import Buildable, ServiceContext, built, serve


@dataclass(frozen=True, slots=True)
class _Warm:
    """A service whose readiness check reads a flag the test flips."""

    ready: list[bool]
    stopped: list[bool]

    async def stop(self) -> None:
        self.stopped.append(True)


class _WarmRecipe:
    def __init__(self) -> None:
        self.ready: list[bool] = []
        self.stopped: list[bool] = []

    async def build(self, ctx: ServiceContext) -> _Warm:
        async def check() -> Check:
            return Check(bool(self.ready), "ok" if self.ready else "warming up")

        ctx.add_check("warm", check)
        return _Warm(self.ready, self.stopped)


async def test_ops_endpoint_reports_health_readiness_and_metrics(nats_url: str) -> None:
    recipe = _WarmRecipe()
    async with built(Service.MEDIA, recipe, LarkbotConfig(), nats_url=nats_url) as service:
        base = f"http://127.0.0.1:{service.ctx.ops.bound_port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/healthz") as resp:
                assert resp.status == 200
            async with http.get(f"{base}/readyz") as resp:
                body = await resp.json()
                assert resp.status == 503
                assert body["checks"]["warm"] == {"ok": False, "detail": "warming up"}
                assert body["checks"]["nats"]["ok"] is True
            recipe.ready.append(True)
            async with http.get(f"{base}/readyz") as resp:
                assert resp.status == 200
            async with http.get(f"{base}/metrics") as resp:
                text = await resp.text()
                assert 'larkbot_service_info{component="media",version=' in text
                assert "larkbot_bus_connected" in text
    assert recipe.stopped == [True]


@dataclass(frozen=True, slots=True)
class _Parts:
    """What a recipe's build wires: fixed once built, stopped by the runtime."""

    bus_name: str
    subject_served: str
    stopped: list[bool]

    async def stop(self) -> None:
        self.stopped.append(True)


@dataclass(frozen=True, slots=True)
class _Recipe:
    subject: str
    stopped: list[bool] = field(default_factory=list)

    async def build(self, ctx: ServiceContext) -> _Parts:
        async def check() -> Check:
            return Check(True, "ok")

        ctx.add_check("built", check)
        return _Parts(ctx.bus.name, self.subject, self.stopped)


async def test_a_recipe_is_built_once_the_bus_is_up_and_its_parts_stopped_on_exit(nats_url: str) -> None:
    recipe = _Recipe("things.served")
    assert isinstance(recipe, Buildable)
    async with built(Service.MEDIA, recipe, LarkbotConfig(), nats_url=nats_url) as service:
        parts = service.components
        assert isinstance(parts, _Parts)
        assert service.ctx.ops.bound_port is not None
        assert parts.subject_served == "things.served"
        assert parts.bus_name == "media"
        assert recipe.stopped == []
    assert recipe.stopped == [True]


async def test_a_recipe_whose_build_fails_does_not_start(nats_url: str) -> None:
    class _Broken:
        async def build(self, ctx: ServiceContext) -> _Parts:
            raise RuntimeError("the database is gone")

    with pytest.raises(RuntimeError, match="the database is gone"):
        async with built(Service.MEDIA, _Broken(), LarkbotConfig(), nats_url=nats_url):
            pass


async def test_readyz_says_starting_until_the_build_returns(nats_url: str) -> None:
    """A replica whose build is still wiring (its own checks not registered yet) is not ready, though
    the bus is up: a restarted driver used to answer 200 before it held a single partition."""
    building: asyncio.Future[ServiceContext] = asyncio.get_running_loop().create_future()
    proceed = asyncio.Event()

    class _Slow:
        async def build(self, ctx: ServiceContext) -> _Parts:
            building.set_result(ctx)
            await proceed.wait()
            return _Parts(ctx.bus.name, "things.slow", [])

    stopping = asyncio.Event()
    task = asyncio.create_task(
        serve(Service.MEDIA, _Slow(), LarkbotConfig(), stopping=stopping, nats_url=nats_url, port=0)
    )
    try:
        ctx = await asyncio.wait_for(building, 60)
        url = f"http://127.0.0.1:{ctx.ops.bound_port}/readyz"
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as resp:
                body = await resp.json()
                assert resp.status == 503
                assert body["checks"]["start"] == {"ok": False, "detail": "starting"}
                assert body["checks"]["nats"]["ok"] is True
            proceed.set()
            ready = False
            for _ in range(600):  # the build returns on the service's loop, soon after ``proceed``
                ready, _ = await ctx.ops.readiness()
                if ready:
                    break
                await asyncio.sleep(0.05)
            assert ready
            async with http.get(url) as resp:
                assert resp.status == 200
                assert (await resp.json())["checks"]["start"] == {"ok": True, "detail": "built"}
    finally:
        proceed.set()
        stopping.set()
        assert await asyncio.wait_for(task, 60) == 0
