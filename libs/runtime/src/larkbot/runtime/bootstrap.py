"""Idempotent declaration of every stream, consumer, KV bucket and object store (from ``names``).

Run by ``larkbot up``, by the deployment's init job and at every service start-up: applying it twice is a
no-op, and a changed declaration updates the existing stream in place.

The one place consumers are declared. Besides the durable consumers of ``names.CONSUMERS``, two kinds
start where their owner's state says, so their owner asks for them here at run time:

- :func:`declare_reader` — an ordered reader without acknowledgements, from a start sequence: a
  partition reader (:mod:`.reader`, resume point from the owner's database) or a one-off read of a
  subject (:func:`.reader.read_subject`, an object's chunks);
- :func:`declare_partition_consumer` — a partition's durable, acked consumer created on first take-over
  with a deliver policy of its owner's choosing (the driver's ``driver-pNN``, ``deliver=new``).

Services bind to what is declared (:class:`.consume.PullConsumer`, :class:`.reader.PartitionReader`);
they never build a ``ConsumerConfig`` themselves.

Replicas and limits come from configuration (``jetstream``, :class:`~.config.JetStreamSettings`) over
the declared defaults, and the bootstrap never undoes an operator:

=======================  ===================================  ============================================
setting                  a missing asset                      an existing asset
=======================  ===================================  ============================================
replicas                 configured                           raised to the configured count; never lowered
max_age, max_bytes       configured, else declared            tightened to the configured limit; a tighter
                                                              one (or one set where we set none) is kept
discard                  configured, else declared            kept
subjects, retention, …   declared                             declared (updated in place)
=======================  ===================================  ============================================

What it keeps against the configuration is logged (WARNING) and counted
(``larkbot_bootstrap_kept_total{asset, setting}``). A cluster electing a leader or moving replicas
answers with timeouts and "unavailable" for a while: each asset is retried for
``jetstream.election_wait_s``, then :class:`BootstrapFailed` names the asset. A replica count the
cluster cannot hold is :class:`BootstrapRefused`, naming the configuration key.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

import nats
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    KeyValueConfig,
    ObjectStoreConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    SubjectTransform,
)

from larkbot.canonical.errors import PermanentError, RetryableError
from larkbot.canonical.names import (
    CONSUMERS,
    KEY_VALUES,
    OBJECT_STORES,
    PARTITIONS,
    STREAMS,
    ConsumerSpec,
    KeyValueSpec,
    ObjectStoreSpec,
    StreamSpec,
)

from .config import AssetSettings, JetStreamSettings
from .kept import differs, kept_from
from .retry import Backoff, Failure, forever, retrying

__all__ = [
    "BootstrapFailed",
    "BootstrapRefused",
    "bootstrap",
    "consumer_config",
    "declare_partition_consumer",
    "declare_reader",
    "ensure_consumer",
    "ensure_key_value",
    "ensure_object_store",
    "ensure_stream",
    "stream_config",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


class BootstrapFailed(RetryableError):
    """The cluster did not answer for an asset within ``jetstream.election_wait_s`` (``asset``)."""

    def __init__(self, asset: str, waited_s: float, cause: BaseException) -> None:
        super().__init__(
            f"{asset}: JetStream did not answer within {waited_s:g} s "
            f"(is the cluster electing a leader or moving replicas?): {type(cause).__name__}: {cause}"
        )
        self.asset = asset


class BootstrapRefused(PermanentError):
    """The server refused an asset as configured (``asset``), e.g. more replicas than it has servers."""

    def __init__(self, asset: str, reason: str) -> None:
        super().__init__(f"{asset}: {reason} (configuration: jetstream.assets.{asset} / jetstream.replicas)")
        self.asset = asset


def stream_config(spec: StreamSpec, settings: AssetSettings | None = None) -> StreamConfig:
    """The configuration a missing stream is created with: declared, under the configured limits."""
    own = settings or AssetSettings()
    max_age = spec.max_age_s if own.max_age_s is None else own.max_age_s
    return StreamConfig(
        name=spec.name,
        subjects=list(spec.subjects),
        retention=RetentionPolicy.WORK_QUEUE if spec.work_queue else RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        max_age=max_age or None,
        max_bytes=spec.max_bytes if own.max_bytes is None else own.max_bytes,
        discard=DiscardPolicy(own.discard or spec.discard),
        num_replicas=own.replicas or 1,
        duplicate_window=spec.duplicate_window_s,
        max_msg_size=spec.max_msg_size,
        subject_transform=_partition_transform(spec.partitioned_prefix) if spec.partitioned_prefix else None,
    )


def _partition_transform(prefix: str) -> SubjectTransform:
    # partition(N, 1, 2) hashes platform and chat tokens: larkbot.canonical.names.partition_of mirrors it.
    dest = f"{prefix}.{{{{partition({PARTITIONS},1,2)}}}}.{{{{wildcard(1)}}}}.{{{{wildcard(2)}}}}"
    return SubjectTransform(src=f"{prefix}.*.*", dest=dest)


def consumer_config(spec: ConsumerSpec) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=spec.durable,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        filter_subject=spec.filter_subject,
        ack_wait=spec.ack_wait_s,
        max_ack_pending=spec.max_ack_pending,
        max_deliver=spec.max_deliver,
    )


async def _converge(js: JetStreamContext, stream: str, wanted: StreamConfig, asset: str) -> None:
    """Update the existing ``stream`` toward ``wanted`` without undoing an operator."""
    info = await js.stream_info(stream)
    merged = kept_from(info.config, replace(wanted, name=stream), asset)
    if differs(info.config, merged):
        await js.update_stream(merged)
        log.info("updated %s (replicas %s)", asset, merged.num_replicas)


async def ensure_stream(
    js: JetStreamContext, spec: StreamSpec, settings: AssetSettings | None = None
) -> None:
    wanted = stream_config(spec, settings)
    try:
        await js.stream_info(spec.name)
    except nats.js.errors.NotFoundError:
        await js.add_stream(wanted)
        log.info("declared stream %s", spec.name)
        return
    await _converge(js, spec.name, wanted, spec.name)


async def ensure_key_value(js: JetStreamContext, spec: KeyValueSpec, settings: AssetSettings) -> None:
    max_bytes = spec.max_bytes if settings.max_bytes is None else settings.max_bytes
    try:
        await js.key_value(spec.bucket)
    except nats.js.errors.BucketNotFoundError:
        await js.create_key_value(
            KeyValueConfig(
                bucket=spec.bucket,
                ttl=spec.ttl_s or None,
                history=spec.history,
                max_bytes=max_bytes,
                replicas=settings.replicas or 1,
            )
        )
        return
    # A bucket's TTL and history are what it means (a lease expires), not limits: left as declared.
    stream = f"KV_{spec.bucket}"
    info = await js.stream_info(stream)
    wanted = replace(info.config, num_replicas=settings.replicas or 1, max_bytes=max_bytes)
    await _converge(js, stream, wanted, spec.bucket)


async def ensure_object_store(js: JetStreamContext, spec: ObjectStoreSpec, settings: AssetSettings) -> None:
    ttl = spec.ttl_s if settings.max_age_s is None else settings.max_age_s
    max_bytes = spec.max_bytes if settings.max_bytes is None else settings.max_bytes
    try:
        await js.object_store(spec.bucket)
    except nats.js.errors.BucketNotFoundError:
        # nats-py sets ``config.bucket`` to its ``bucket`` argument even when a config is given: pass both.
        await js.create_object_store(
            bucket=spec.bucket,
            config=ObjectStoreConfig(
                bucket=spec.bucket, ttl=ttl or None, max_bytes=max_bytes, replicas=settings.replicas or 1
            ),
        )
        return
    stream = f"OBJ_{spec.bucket}"
    info = await js.stream_info(stream)
    wanted = replace(
        info.config, num_replicas=settings.replicas or 1, max_age=ttl or None, max_bytes=max_bytes
    )
    await _converge(js, stream, wanted, spec.bucket)


async def ensure_consumer(js: JetStreamContext, spec: ConsumerSpec) -> None:
    # Replicas 0: the consumer keeps as many as its stream, and follows it when the stream is raised.
    await js.add_consumer(spec.stream, consumer_config(spec))


async def declare_reader(
    js: JetStreamContext,
    stream: str,
    name: str,
    filter_subject: str,
    *,
    start_seq: int | None = None,
    inactive_threshold_s: float = 120.0,
) -> None:
    """(Re)declare the reader consumer ``name``: ``filter_subject`` of ``stream`` from ``start_seq`` (all
    of it when ``None``), no acknowledgements. A consumer left by a previous run under the same name is
    replaced, so reading starts exactly there. One whose reader died is removed by the server after
    ``inactive_threshold_s``."""
    with contextlib.suppress(nats.js.errors.NotFoundError):
        await js.delete_consumer(stream, name)
    await js.add_consumer(
        stream,
        ConsumerConfig(
            name=name,
            deliver_policy=DeliverPolicy.ALL if start_seq is None else DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=start_seq,
            ack_policy=AckPolicy.NONE,
            filter_subject=filter_subject,
            inactive_threshold=inactive_threshold_s,
        ),
    )


async def declare_partition_consumer(
    js: JetStreamContext,
    stream: str,
    durable: str,
    filter_subject: str,
    *,
    deliver_new: bool,
    ack_wait_s: float = 30.0,
    max_ack_pending: int = 1000,
) -> None:
    """Make sure the durable, acked consumer of one partition exists (kept as it is when it does). Two
    replicas racing here declare the same configuration: the second add is a no-op."""
    try:
        await js.consumer_info(stream, durable)
        return
    except nats.js.errors.NotFoundError:
        pass
    await js.add_consumer(
        stream,
        ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.NEW if deliver_new else DeliverPolicy.ALL,
            filter_subject=filter_subject,
            ack_wait=ack_wait_s,
            max_ack_pending=max_ack_pending,
        ),
    )


async def bootstrap(js: JetStreamContext, settings: JetStreamSettings | None = None) -> None:
    """Declare everything in ``larkbot.canonical.names``; safe to run concurrently and repeatedly."""
    settings = settings or JetStreamSettings()
    for stream in STREAMS:
        own = settings.for_asset(stream.name)
        await _waited(settings, stream.name, functools.partial(ensure_stream, js, stream, own))
    for consumer in CONSUMERS:
        await _waited(settings, consumer.durable, functools.partial(ensure_consumer, js, consumer))
    for kv in KEY_VALUES:
        own = settings.for_asset(kv.bucket)
        await _waited(settings, kv.bucket, functools.partial(ensure_key_value, js, kv, own))
    for store in OBJECT_STORES:
        own = settings.for_asset(store.bucket)
        await _waited(settings, store.bucket, functools.partial(ensure_object_store, js, store, own))


#: What a cluster answers while it elects a stream's leader or moves its replicas.
_ELECTING = (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError, nats.errors.NoRespondersError)
#: What a server answers (500) when a stream is created again while the store of the one deleted under
#: the same name is still being removed; its other 500s (replicas it cannot hold) are final.
_STORE_BUSY = "error creating store"
#: JetStream API errors that say "not now" rather than "never": no leader yet, cluster not current.
_NOT_NOW_CODES = frozenset({10008, 10009, 10023})
#: "No suitable peers for placement": a cluster still forming (its servers not all known to the meta
#: leader yet) — or one with fewer servers than replicas asked for, which waiting does not change.
_NO_PEERS = 10005


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, _ELECTING):
        return True
    if isinstance(exc, nats.js.errors.ServerError) and _STORE_BUSY in (exc.description or ""):
        return True
    return isinstance(exc, nats.js.errors.APIError) and exc.err_code in _NOT_NOW_CODES | {_NO_PEERS}


async def _waited(settings: JetStreamSettings, asset: str, declare: Callable[[], Awaitable[T]]) -> T:
    started = time.monotonic()

    def left_s() -> float:
        return settings.election_wait_s - (time.monotonic() - started)

    def retried(_failure: Failure, attempt: int, wait: float, exc: BaseException | None) -> None:
        log.warning("bootstrap: %s not declared yet (%s); again in %.1f s", asset, type(exc).__name__, wait)

    def classify(exc: BaseException) -> Failure | None:
        return Failure.TRANSIENT if _transient(exc) else None

    policy = forever(Backoff(0.25, 2.0, 2.0, 0.25))
    try:
        async for attempt in retrying(policy, classify, left_s=left_s, on_retry=retried):
            with attempt:
                return await declare()
    except nats.js.errors.APIError as exc:
        if exc.err_code == _NO_PEERS:
            waited = f"{exc.description} for {settings.election_wait_s:g} s: fewer servers than replicas?"
            raise BootstrapRefused(asset, waited) from None
        if _transient(exc):
            raise BootstrapFailed(asset, settings.election_wait_s, exc) from None
        raise BootstrapRefused(asset, exc.description or str(exc)) from None
    except _ELECTING as exc:
        raise BootstrapFailed(asset, settings.election_wait_s, exc) from None
    raise AssertionError("unreachable: retrying either returns or raises")  # pragma: no cover
