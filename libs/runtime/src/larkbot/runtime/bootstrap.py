"""Idempotent declaration of every stream, consumer, KV bucket and object store (from ``names``).

Run by ``larkbot up``, by the deployment's init job and at every service start-up: applying it twice is a
no-op, and a changed declaration updates the existing stream in place.
"""

from __future__ import annotations

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
