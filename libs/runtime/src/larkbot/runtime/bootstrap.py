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
"""

from __future__ import annotations

import contextlib
import logging

import nats
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    SubjectTransform,
)

from larkbot.canonical.names import (
    CONSUMERS,
    KEY_VALUES,
    OBJECT_STORES,
    PARTITIONS,
    STREAMS,
    ConsumerSpec,
    StreamSpec,
)

__all__ = [
    "bootstrap",
    "consumer_config",
    "declare_partition_consumer",
    "declare_reader",
    "ensure_consumer",
    "ensure_stream",
    "stream_config",
]

log = logging.getLogger(__name__)


def stream_config(spec: StreamSpec) -> StreamConfig:
    return StreamConfig(
        name=spec.name,
        subjects=list(spec.subjects),
        retention=RetentionPolicy.WORK_QUEUE if spec.work_queue else RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        max_age=spec.max_age_s or None,
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


async def ensure_stream(js: JetStreamContext, spec: StreamSpec) -> None:
    config = stream_config(spec)
    try:
        await js.stream_info(spec.name)
    except nats.js.errors.NotFoundError:
        await js.add_stream(config)
        log.info("declared stream %s", spec.name)
        return
    await js.update_stream(config)


async def ensure_consumer(js: JetStreamContext, spec: ConsumerSpec) -> None:
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


async def bootstrap(js: JetStreamContext) -> None:
    """Declare everything in ``larkbot.canonical.names``; safe to run concurrently and repeatedly."""
    for stream in STREAMS:
        await ensure_stream(js, stream)
    for consumer in CONSUMERS:
        await ensure_consumer(js, consumer)
    for kv in KEY_VALUES:
        try:
            await js.key_value(kv.bucket)
        except nats.js.errors.BucketNotFoundError:
            await js.create_key_value(bucket=kv.bucket, ttl=kv.ttl_s or None, history=kv.history)
    for store in OBJECT_STORES:
        try:
            await js.object_store(store.bucket)
        except nats.js.errors.BucketNotFoundError:
            await js.create_object_store(bucket=store.bucket)
