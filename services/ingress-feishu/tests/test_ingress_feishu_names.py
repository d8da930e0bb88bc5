"""The contact-name table on a real JetStream: loaded at start, mirrored between processes, one rule."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator

from pydantic import SecretStr

from larkbot.ingress_feishu.adapters.api import FeishuApi
from larkbot.ingress_feishu.adapters.contacts import Contacts, kv_key
from larkbot.ingress_feishu.adapters.rest import FeishuRest
from larkbot.ingress_feishu.fake.samples import ALICE, BOB, CAROL
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.runtime.bus import Bus
from larkbot.testkit.ingress_feishu.watch import ContactsWatch


@contextlib.asynccontextmanager
async def contacts(bus: Bus) -> AsyncIterator[tuple[Contacts, ContactsWatch]]:
    """A table as a process holds it, with the observer that tells when its mirror caught up."""
    seen = ContactsWatch()
    table = Contacts(bus, None, ttl_s=3600.0, observer=seen)
    await table.start()
    watch = asyncio.create_task(table.follow())
    try:
        yield table, seen
    finally:
        await table.close()
        await asyncio.wait_for(watch, 30)


async def test_a_new_process_starts_with_every_name_and_follows_the_others(bus: Bus) -> None:
    async with contacts(bus) as (a, _a_seen):
        await a.learn(ALICE, "Alice Wang")
        await a.seed([(BOB, "Bob")])
        async with contacts(bus) as (b, b_seen):
            assert dict(b.names()) == {ALICE: "Alice Wang", BOB: "Bob"}  # loaded before any event
            await a.learn(ALICE, "Alice Li")  # a rename in the directory is a real rename
            await a.seed([(ALICE, "Ali"), (BOB, "Robert"), (CAROL, "Carol")])  # payloads only fill gaps
            await b_seen.caught_up(bus)
            assert dict(b.names()) == {ALICE: "Alice Li", BOB: "Bob", CAROL: "Carol"}


async def test_two_processes_naming_one_person_at_once_agree(bus: Bus) -> None:
    dave = "ou_d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0"
    async with contacts(bus) as (a, a_seen), contacts(bus) as (b, b_seen):
        await asyncio.gather(a.seed([(dave, "Dave")]), b.seed([(dave, "David")]))
        await a_seen.caught_up(bus)
        await b_seen.caught_up(bus)
        assert a.names()[dave] == b.names()[dave]
        first = a.names()[dave]
        await asyncio.gather(a.learn(dave, "David Wu"), b.seed([(dave, "D.")]))
        await a_seen.caught_up(bus)
        await b_seen.caught_up(bus)
        assert (a.names()[dave], b.names()[dave]) == ("David Wu", "David Wu")
    assert first in {"Dave", "David"}


def test_kv_keys_are_open_ids_or_digests() -> None:
    assert kv_key(ALICE) == ALICE
    odd = kv_key("ou_a.b c/\x00")
    assert odd == "sha256-" + hashlib.sha256(b"ou_a.b c/\x00").hexdigest()


async def test_a_transient_lookup_failure_is_asked_again_soon_not_cached_as_a_miss(bus: Bus) -> None:
    now = [1_000_000.0]
    async with FakeFeishu(users={ALICE: "Alice Wang"}) as fake:
        rest = FeishuRest(fake.url, fake.app_id, SecretStr(fake.app_secret), timeout_s=5.0)
        seen = ContactsWatch()
        table = Contacts(
            bus, FeishuApi(rest), ttl_s=6 * 3600.0, retry_s=60.0, clock=lambda: now[0], observer=seen
        )
        await table.start()
        try:
            fake.fail_next("contact.user", status=500, code=1500)
            table.want([ALICE])
            await seen.settled()
            assert table.entry(ALICE) is None
            table.want([ALICE])  # within the retry delay: not asked
            await seen.settled()
            now[0] += 60.0
            table.want([ALICE])
            await seen.settled()
            assert table.names()[ALICE] == "Alice Wang"
            assert len(fake.routed("contact.user")) == 2
        finally:
            await table.close()
            await rest.close()
