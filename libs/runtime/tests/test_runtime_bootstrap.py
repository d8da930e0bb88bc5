"""The bootstrap on a server of its own: declared limits, configured ones, and what an operator set kept."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.events import TypingSignal
from larkbot.canonical.names import STREAM_DEAD_LETTER, STREAM_EVENTS, STREAM_MEDIA, Platform
from larkbot.runtime.bootstrap import BootstrapRefused, bootstrap
from larkbot.runtime.bus import Bus, BusUnavailable, StreamFull, connect
from larkbot.runtime.config import AssetSettings, JetStreamSettings, NatsSettings, parse_config
from larkbot.runtime.natsserver import EmbeddedNats

DAY = 24 * 3600.0


@pytest.fixture
async def own_bus(tmp_path: Path) -> AsyncIterator[Bus]:
    """A bus on a server nobody else uses: these tests change what the streams are."""
    server = EmbeddedNats(tmp_path / "nats")
    url = server.start()
    bus = await connect(NatsSettings(), "test", url=url, give_up_after_s=30)
    try:
        yield bus
    finally:
        await bus.close(5.0)
        server.stop()


def kept(asset: str, setting: str) -> float:
    value = REGISTRY.get_sample_value("larkbot_bootstrap_kept_total", {"asset": asset, "setting": setting})
    return value or 0.0


async def test_a_fresh_bus_is_declared_bounded(own_bus: Bus) -> None:
    await bootstrap(own_bus.js)
    media = (await own_bus.js.stream_info(STREAM_MEDIA)).config
    assert (media.max_bytes, media.discard) == (1024**3, "new")
    dead = (await own_bus.js.stream_info(STREAM_DEAD_LETTER)).config
    assert (dead.max_bytes, dead.discard, dead.max_age) == (1024**3, "new", 30 * DAY)
    blobs = (await own_bus.js.stream_info("OBJ_blobs")).config
    assert (blobs.max_bytes, blobs.max_age) == (4 * 1024**3, 30 * DAY)
    events = (await own_bus.js.stream_info(STREAM_EVENTS)).config
    assert (events.num_replicas, events.max_age) == (1, 7 * DAY)


async def test_configured_limits_apply_to_a_missing_asset_and_tighten_an_existing_one(own_bus: Bus) -> None:
    configured = JetStreamSettings(assets={"blobs": AssetSettings(max_bytes=10**9, max_age_s=DAY)})
    await bootstrap(own_bus.js, configured)
    blobs = (await own_bus.js.stream_info("OBJ_blobs")).config
    assert (blobs.max_bytes, blobs.max_age) == (10**9, DAY)

    tighter = JetStreamSettings(assets={STREAM_EVENTS: AssetSettings(max_bytes=50 * 1024**2, max_age_s=DAY)})
    await bootstrap(own_bus.js, tighter)
    events = (await own_bus.js.stream_info(STREAM_EVENTS)).config
    assert (events.max_bytes, events.max_age) == (50 * 1024**2, DAY)


async def test_what_an_operator_tightened_or_changed_is_kept_logged_and_counted(own_bus: Bus) -> None:
    await bootstrap(own_bus.js)
    media = (await own_bus.js.stream_info(STREAM_MEDIA)).config
    await own_bus.js.update_stream(replace(media, max_bytes=64 * 1024**2))
    dead = (await own_bus.js.stream_info(STREAM_DEAD_LETTER)).config
    await own_bus.js.update_stream(replace(dead, max_age=3 * DAY, discard="old"))
    before = (kept(STREAM_MEDIA, "max_bytes"), kept(STREAM_DEAD_LETTER, "max_age"))

    await bootstrap(own_bus.js)  # what every service start does

    media = (await own_bus.js.stream_info(STREAM_MEDIA)).config
    assert media.max_bytes == 64 * 1024**2
    dead = (await own_bus.js.stream_info(STREAM_DEAD_LETTER)).config
    assert (dead.max_age, dead.discard) == (3 * DAY, "old")
    assert kept(STREAM_MEDIA, "max_bytes") == before[0] + 1
    assert kept(STREAM_DEAD_LETTER, "max_age") == before[1] + 1
    assert kept(STREAM_DEAD_LETTER, "discard") >= 1


async def test_a_limit_an_operator_set_where_we_set_none_is_kept(own_bus: Bus) -> None:
    await bootstrap(own_bus.js)
    events = (await own_bus.js.stream_info(STREAM_EVENTS)).config
    assert events.max_bytes in (None, -1)
    await own_bus.js.update_stream(replace(events, max_bytes=200 * 1024**2))
    await bootstrap(own_bus.js)
    assert (await own_bus.js.stream_info(STREAM_EVENTS)).config.max_bytes == 200 * 1024**2


async def test_more_replicas_than_the_server_can_hold_is_refused_naming_the_asset(own_bus: Bus) -> None:
    with pytest.raises(BootstrapRefused) as caught:
        await bootstrap(own_bus.js, JetStreamSettings(replicas=3))
    assert caught.value.asset == STREAM_EVENTS
    assert "jetstream.assets.EVENTS" in str(caught.value)


async def test_a_publish_refused_at_the_limit_is_an_error_the_producer_can_handle(own_bus: Bus) -> None:
    await bootstrap(own_bus.js, JetStreamSettings(assets={STREAM_MEDIA: AssetSettings(max_bytes=4096)}))
    signal = TypingSignal(platform=Platform.TELEGRAM, chat_id="-1001", user_id="42", at_ms=1)
    accepted = 0
    with pytest.raises(StreamFull) as caught:  # noqa: PT012 - the limit is reached after some publishes
        while accepted < 100:
            await own_bus.publish("media.jobs.thumbnail", signal)
            accepted += 1
    assert accepted > 0
    assert isinstance(caught.value, BusUnavailable)  # callers that retry a lost publish retry this too
    assert "maximum bytes exceeded" in str(caught.value)
    info = await own_bus.js.stream_info(STREAM_MEDIA)
    assert 0 < info.state.bytes <= 4096  # what was accepted is still there: nothing was dropped


def test_an_unknown_asset_in_configuration_is_refused_naming_its_key() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"jetstream": {"assets": {"EVENT": {"replicas": 3}}}}, {})
    assert "jetstream.assets.EVENT" in str(caught.value)


def test_a_store_still_being_removed_is_waited_out_and_a_refusal_is_not() -> None:
    # Created again right after a stream of the same name was deleted, a server may answer 500 "error
    # creating store for stream" while it still removes the old store: asked again, it succeeds.
    from nats.js.errors import BadRequestError, ServerError

    from larkbot.runtime import bootstrap as declarations

    store = ServerError(code=500, err_code=10049, description="error creating store for stream")
    assert declarations._transient(store)
    refused = ServerError(
        code=500, err_code=10074, description="replicas > 1 not supported in non-clustered mode"
    )
    assert not declarations._transient(refused)
    assert not declarations._transient(BadRequestError(code=400, err_code=10052, description="bad request"))
