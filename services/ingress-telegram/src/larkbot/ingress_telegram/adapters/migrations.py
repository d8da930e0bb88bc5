"""Group → supergroup upgrades, kept in the KV bucket ``telegram-chat-migrations`` (key: the group's id,
value: the supergroup's id) so that a chat continues under its configured id across restarts.

Loaded into the adapter before any update is taken, written when the adapter learns a new upgrade (from
the upgrade's service messages or a send Telegram refused with ``migrate_to_chat_id``), and watched
through the runtime's KV watch (:class:`~larkbot.runtime.watch.KvWatch`), so that a replica learns what
another one wrote. An operator can also record one by hand (``nats kv put
telegram-chat-migrations <group id> <supergroup id>``), for an upgrade that happened while the service
was not reading the group.
"""

from __future__ import annotations

import logging

from nats.js.kv import KeyValue

from larkbot.canonical.names import KV_TELEGRAM_CHAT_MIGRATIONS
from larkbot.runtime.bus import Bus
from larkbot.runtime.watch import KvUpdate, KvWatch

from ..core import TelegramAdapter

log = logging.getLogger(__name__)


class ChatMigrations:
    def __init__(self, bus: Bus, kv: KeyValue, adapter: TelegramAdapter) -> None:
        self.kv = kv
        self.adapter = adapter
        self._mirror = KvWatch(bus, KV_TELEGRAM_CHAT_MIGRATIONS, self._take)

    @classmethod
    async def open(cls, bus: Bus, adapter: TelegramAdapter) -> ChatMigrations:
        """Mirror every stored upgrade into ``adapter`` (returns once all are loaded)."""
        store = cls(bus, await bus.js.key_value(KV_TELEGRAM_CHAT_MIGRATIONS), adapter)
        await store._mirror.start()
        return store

    async def watch(self) -> None:
        """Mirror what other replicas write (runs until :meth:`close`)."""
        await self._mirror.run()

    async def _take(self, update: KvUpdate) -> None:
        if not update.value:
            return  # an upgrade cannot be undone: a deleted record only stops new processes learning it
        supergroup = update.value.decode(errors="replace")
        if not supergroup.lstrip("-").isdigit() or not update.key.lstrip("-").isdigit():
            log.warning("chat migration record %r ignored: not a chat id pair", update.key)
            return
        if self.adapter.migrations.learn(update.key, supergroup):
            log.info("chat %s continues as supergroup %s", update.key, supergroup)

    async def record(self, group: str, supergroup: str) -> None:
        """Store an upgrade the adapter learnt (idempotent)."""
        await self.kv.put(group, supergroup.encode())
        log.info("chat %s was upgraded to supergroup %s; it continues under %s", group, supergroup, group)

    async def close(self) -> None:
        await self._mirror.stop()
