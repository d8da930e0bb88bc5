"""The bot's own identity per platform, as each ingress publishes it to the ``identity`` KV bucket.

A mirror of the bucket (:class:`larkbot.runtime.watch.KvWatch`): :meth:`Identities.start` loads what is
stored, :meth:`Identities.run` follows later writes, and an identity that changed after the load (another
bot id or user name) re-renders the platform's chats (``on_change``). An entry that does not decode is
logged and counted by the watch and changes nothing; a deleted key keeps the identity last seen.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from larkbot.canonical.codec import decode
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import KV_IDENTITY, Platform, identity_key
from larkbot.runtime.bus import Bus
from larkbot.runtime.watch import KvUpdate, KvWatch

log = logging.getLogger(__name__)

#: The bucket's key of each platform's identity.
PLATFORM_OF_KEY = {identity_key(platform.value): platform for platform in Platform}


class Identities:
    """Current identities (``current``, shared with the render parameters), kept by a watch."""

    def __init__(
        self,
        bus: Bus,
        current: dict[Platform, BotIdentity],
        on_change: Callable[[Platform], Awaitable[None]],
    ) -> None:
        self.current = current
        self.on_change = on_change
        self.watch = KvWatch(bus, KV_IDENTITY, self._take)
        #: Set once the stored identities were loaded: from then on a change re-renders.
        self._following = False

    async def start(self) -> None:
        """Load every stored identity."""
        await self.watch.start()
        self._following = True

    async def run(self) -> None:
        """Follow the bucket until :meth:`stop`."""
        await self.watch.run()

    async def stop(self) -> None:
        await self.watch.stop()

    async def _take(self, update: KvUpdate) -> None:
        platform = PLATFORM_OF_KEY.get(update.key)
        if platform is None or not update.value:
            return
        identity = decode(update.value, BotIdentity)
        previous = self.current.get(platform)
        self.current[platform] = identity
        changed = previous is None or (previous.bot_id, previous.username) != (
            identity.bot_id,
            identity.username,
        )
        if changed and self._following:
            log.info("bot identity of %s changed: re-rendering its chats", platform.value)
            await self.on_change(platform)
