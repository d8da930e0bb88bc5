"""Group → supergroup upgrades, kept in the KV bucket ``telegram-chat-migrations`` (key: the group's id,
value: the supergroup's id) so that a chat continues under its configured id across restarts.

Loaded into the adapter before any update is taken, written when the adapter learns a new upgrade (from
the upgrade's service messages or a send Telegram refused with ``migrate_to_chat_id``), and watched, so
that a replica learns what another one wrote. An operator can also record one by hand (``nats kv put
telegram-chat-migrations <group id> <supergroup id>``), for an upgrade that happened while the service
was not reading the group.
"""

from __future__ import annotations

import contextlib
import logging

import nats
from nats.js import JetStreamContext
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from larkbot.canonical.names import KV_TELEGRAM_CHAT_MIGRATIONS

from ..core import TelegramAdapter

log = logging.getLogger(__name__)


class ChatMigrations:
    def __init__(self, kv: KeyValue, adapter: TelegramAdapter) -> None:
        self.kv = kv
        self.adapter = adapter
        self._watcher: KeyValue.KeyWatcher | None = None

    @classmethod
    async def open(cls, js: JetStreamContext, adapter: TelegramAdapter) -> ChatMigrations:
        """Mirror every stored upgrade into ``adapter`` (returns once all are loaded)."""
        store = cls(await js.key_value(KV_TELEGRAM_CHAT_MIGRATIONS), adapter)
        store._watcher = await store.kv.watchall()
        while (entry := await store._watcher.updates(timeout=30.0)) is not None:  # type: ignore[no-untyped-call]
            store._take(entry)
        return store

    async def watch(self) -> None:
        """Mirror what other replicas write (runs until :meth:`close`)."""
        assert self._watcher is not None
        async for entry in self._watcher:
            if entry is not None:
                self._take(entry)

    def _take(self, entry: KeyValue.Entry) -> None:
        if entry.operation in (KV_DEL, KV_PURGE) or not entry.value:
            return  # an upgrade cannot be undone: a deleted record only stops new processes learning it
        supergroup = entry.value.decode(errors="replace")
        if not supergroup.lstrip("-").isdigit() or not entry.key.lstrip("-").isdigit():
            log.warning("chat migration record %r ignored: not a chat id pair", entry.key)
            return
        if self.adapter.migrations.learn(entry.key, supergroup):
            log.info("chat %s continues as supergroup %s", entry.key, supergroup)

    async def record(self, group: str, supergroup: str) -> None:
        """Store an upgrade the adapter learnt (idempotent)."""
        await self.kv.put(group, supergroup.encode())
        log.info("chat %s was upgraded to supergroup %s; it continues under %s", group, supergroup, group)

    async def close(self) -> None:
        if self._watcher is not None:
            with contextlib.suppress(nats.errors.Error):
                await self._watcher.stop()  # type: ignore[no-untyped-call]
            self._watcher = None
