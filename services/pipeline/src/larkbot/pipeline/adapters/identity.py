"""The bot's own identity per platform, as each ingress publishes it to the ``identity`` KV bucket."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

import nats
from nats.js.kv import KeyValue

from larkbot.canonical.codec import decode
from larkbot.canonical.errors import ContractError
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import KV_IDENTITY, Platform, identity_key
from larkbot.runtime.bus import Bus

log = logging.getLogger(__name__)


class Identities:
    """Current identities, plus a watch that reports changes (``on_change(platform)``)."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.current: dict[Platform, BotIdentity] = {}
        self._watchers: list[KeyValue.KeyWatcher] = []

    async def load(self) -> None:
        kv = await self.bus.js.key_value(KV_IDENTITY)
        for platform in Platform:
            with contextlib.suppress(nats.js.errors.KeyNotFoundError):
                entry = await kv.get(identity_key(platform.value))
                self._take(platform, entry.value)

    def _take(self, platform: Platform, value: bytes | None) -> bool:
        if not value:
            return False
        try:
            identity = decode(value, BotIdentity)
        except ContractError as exc:
            log.error("identity of %s is not readable: %s", platform.value, exc)
            return False
        previous = self.current.get(platform)
        self.current[platform] = identity
        return previous is None or (previous.bot_id, previous.username) != (
            identity.bot_id,
            identity.username,
        )

    async def watch(self, platform: Platform, on_change: Callable[[Platform], Awaitable[None]]) -> None:
        kv = await self.bus.js.key_value(KV_IDENTITY)
        watcher = await kv.watch(identity_key(platform.value))
        self._watchers.append(watcher)
        async for entry in watcher:
            if entry is None or entry.value is None:
                continue
            if self._take(platform, entry.value):
                log.info("bot identity of %s changed: re-rendering its chats", platform.value)
                await on_change(platform)

    async def stop(self) -> None:
        for watcher in self._watchers:
            with contextlib.suppress(nats.errors.Error):
                await watcher.stop()  # type: ignore[no-untyped-call]
        self._watchers.clear()
