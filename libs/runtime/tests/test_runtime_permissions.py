"""A NATS user per service, against a real server: each may do its own work, nothing outside its subjects."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client

from larkbot.canonical.names import (
    KV_PLATFORM_BUDGET_MINUTES,
    KV_RATE_LIMITS,
    QUEUE_ACTIONS,
    STREAM_EVENTS,
    actions_subject,
    fetch_subject,
)
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.budgets.store import BudgetPlan, Budgets, read_speaking_budget
from larkbot.runtime.bus import flush
from larkbot.runtime.natsserver import EmbeddedNats
from larkbot.runtime.permissions import PERMISSIONS, authorization_conf, users_conf

WAIT = 10.0
ROOT = Path(__file__).parents[3]


def password(user: str) -> str:
    return f"pw-{user}-0123456789"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNats]:
    nats_server = EmbeddedNats(
        tmp_path_factory.mktemp("nats-users"), extra_conf=authorization_conf(lambda u: f'"{password(u)}"')
    )
    nats_server.start()
    try:
        yield nats_server
    finally:
        nats_server.stop()


class User:
    """A client connected as one service's user, keeping the permission errors the server sent it."""

    def __init__(self, nc: Client, errors: list[str]) -> None:
        self.nc = nc
        self.errors = errors


async def connect_as(server: EmbeddedNats, user: str) -> User:
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    nc = await nats.connect(
        server.url, user=user, password=password(user), error_cb=on_error, allow_reconnect=False
    )
    return User(nc, errors)


async def permission_error(user: User) -> str:
    async with asyncio.timeout(WAIT):
        # nats-py reports the server's -ERR lower-cased.
        while not any("permissions violation" in e for e in user.errors):
            await flush(user.nc)
            await asyncio.sleep(0.05)
    return next(e for e in user.errors if "permissions violation" in e)


async def test_the_bootstrap_user_declares_everything(server: EmbeddedNats) -> None:
    boot = await connect_as(server, "bootstrap")
    try:
        await bootstrap(boot.nc.jetstream())
        assert (await boot.nc.jetstream().stream_info(STREAM_EVENTS)).config.name == STREAM_EVENTS
    finally:
        await boot.nc.close()


async def test_the_media_worker_cannot_send_a_platform_action(server: EmbeddedNats) -> None:
    media, feishu = await connect_as(server, "media"), await connect_as(server, "ingress-feishu")
    try:
        received: list[bytes] = []

        async def on_action(msg: nats.aio.msg.Msg) -> None:
            received.append(msg.data)

        await feishu.nc.subscribe("actions.feishu", cb=on_action)
        await flush(feishu.nc)
        await media.nc.publish("actions.feishu", b'{"kind": "send_message"}')
        error = await permission_error(media)
        assert 'publish to "actions.feishu"' in error
        # What the media worker may publish arrives.
        pipeline = await connect_as(server, "pipeline")
        results: list[bytes] = []
        arrived = asyncio.Event()

        async def on_result(msg: nats.aio.msg.Msg) -> None:
            results.append(msg.data)
            arrived.set()

        await pipeline.nc.subscribe("media.results.>", cb=on_result)
        await flush(pipeline.nc)
        await media.nc.publish("media.results.telegram.1", b"{}")
        await flush(media.nc)
        await asyncio.wait_for(arrived.wait(), WAIT)
        assert results == [b"{}"]
        assert received == []
        await pipeline.nc.close()
    finally:
        await media.nc.close()
        await feishu.nc.close()


async def test_the_media_worker_asks_the_ingresses_fetch_subject_and_still_no_action(
    server: EmbeddedNats,
) -> None:
    """Its downloads and custom emoji go to ``fetch.<platform>`` of each ingress, served within the
    ingress's own permissions; ``actions.<platform>`` stays closed to it."""
    media = await connect_as(server, "media")
    ingresses = [await connect_as(server, "ingress-feishu"), await connect_as(server, "ingress-telegram")]
    try:
        actions: list[bytes] = []

        async def answer(msg: nats.aio.msg.Msg) -> None:
            await msg.respond(b"fetched " + msg.data)

        async def on_action(msg: nats.aio.msg.Msg) -> None:
            actions.append(msg.data)

        for ingress, platform in zip(ingresses, ("feishu", "telegram"), strict=True):
            await ingress.nc.subscribe(fetch_subject(platform), queue=QUEUE_ACTIONS, cb=answer)
            await ingress.nc.subscribe(actions_subject(platform), queue=QUEUE_ACTIONS, cb=on_action)
            await flush(ingress.nc)
        for platform in ("feishu", "telegram"):
            reply = await media.nc.request(fetch_subject(platform), b"download", timeout=WAIT)
            assert reply.data == b"fetched download"
        assert not media.errors
        assert all(not ingress.errors for ingress in ingresses)
        await media.nc.publish(actions_subject("telegram"), b'{"kind": "send_message"}')
        assert 'publish to "actions.telegram"' in await permission_error(media)
        assert actions == []
    finally:
        await media.nc.close()
        for ingress in ingresses:
            await ingress.nc.close()


async def test_a_service_cannot_delete_or_purge_a_stream(server: EmbeddedNats) -> None:
    boot, media = await connect_as(server, "bootstrap"), await connect_as(server, "media")
    try:
        await bootstrap(boot.nc.jetstream())
        js = media.nc.jetstream()
        with pytest.raises((nats.errors.NoRespondersError, nats.errors.TimeoutError)):
            await js.delete_stream(STREAM_EVENTS)
        assert f'publish to "$js.api.stream.delete.{STREAM_EVENTS.lower()}"' in await permission_error(media)
        media.errors.clear()
        with pytest.raises((nats.errors.NoRespondersError, nats.errors.TimeoutError)):
            await js.purge_stream(STREAM_EVENTS)
        assert f'publish to "$js.api.stream.purge.{STREAM_EVENTS.lower()}"' in await permission_error(media)
        # What it does need still answers, and the stream is intact.
        assert (await js.stream_info(STREAM_EVENTS)).config.name == STREAM_EVENTS
    finally:
        await media.nc.close()
        await boot.nc.close()


async def test_only_the_driver_writes_the_rate_limits(server: EmbeddedNats) -> None:
    boot = await connect_as(server, "bootstrap")
    driver, pipeline = await connect_as(server, "driver"), await connect_as(server, "pipeline")
    try:
        await bootstrap(boot.nc.jetstream())
        kv = await driver.nc.jetstream().key_value(KV_RATE_LIMITS)
        revision = await kv.create("person.abc", b"{}")
        assert await kv.update("person.abc", b"{}", last=revision) > revision
        assert not driver.errors
        other = await pipeline.nc.jetstream().key_value(KV_RATE_LIMITS)
        with pytest.raises((nats.errors.NoRespondersError, nats.errors.TimeoutError)):
            await other.put("person.abc", b"{}")
        assert f'publish to "$kv.{KV_RATE_LIMITS}.person.abc"' in await permission_error(pipeline)
    finally:
        await pipeline.nc.close()
        await driver.nc.close()
        await boot.nc.close()


async def test_a_service_cannot_listen_to_another_services_requests(server: EmbeddedNats) -> None:
    media = await connect_as(server, "media")
    try:
        await media.nc.subscribe("llm.generate")
        error = await permission_error(media)
        assert 'subscription to "llm.generate"' in error
    finally:
        await media.nc.close()


async def test_a_service_answers_the_requests_it_serves(server: EmbeddedNats) -> None:
    gateway, driver = await connect_as(server, "llm-gateway"), await connect_as(server, "driver")
    try:

        async def answer(msg: nats.aio.msg.Msg) -> None:
            await msg.respond(b"pong")

        await gateway.nc.subscribe("llm.generate", cb=answer)
        await flush(gateway.nc)
        reply = await driver.nc.request("llm.generate", b"ping", timeout=WAIT)
        assert reply.data == b"pong"
        assert not gateway.errors
    finally:
        await gateway.nc.close()
        await driver.nc.close()


async def test_only_the_ingress_services_book_budgets_and_the_driver_reads_them(server: EmbeddedNats) -> None:
    boot = await connect_as(server, "bootstrap")
    telegram, driver = await connect_as(server, "ingress-telegram"), await connect_as(server, "driver")
    try:
        await bootstrap(boot.nc.jetstream())
        plan = BudgetPlan("telegram", messages_per_minute=20, groups_only=True)
        budgets = await Budgets.open(telegram.nc.jetstream(), plan)
        await budgets.spend_messages("-1001")
        assert not telegram.errors
        seen = await read_speaking_budget(
            driver.nc.jetstream(), "telegram", "-1001", time.time_ns() // 1_000_000
        )
        assert seen.minute == 19
        kv = await driver.nc.jetstream().key_value(KV_PLATFORM_BUDGET_MINUTES)
        with pytest.raises((nats.errors.NoRespondersError, nats.errors.TimeoutError)):
            await kv.put("telegram.-1001", b"{}")
        assert f'publish to "$kv.{KV_PLATFORM_BUDGET_MINUTES}' in await permission_error(driver)
    finally:
        for user in (boot, telegram, driver):
            await user.nc.close()


def test_every_service_has_a_user_and_the_shipped_file_is_the_generated_one() -> None:
    assert set(PERMISSIONS) == {"ingress-feishu", "ingress-telegram", "pipeline", "driver", "media"} | {
        "llm-gateway",
        "bootstrap",
    }
    assert (ROOT / "deploy" / "nats" / "users.conf").read_text(encoding="utf-8") == users_conf()
