"""Subject, stream, consumer, bucket and header names: the single source of truth of the bus layout.

Subjects carry platform and chat ids as tokens. Ids are escaped with :func:`subject_token` so that a chat id
containing ``.``, ``*``, ``>`` or whitespace can never change a subject's shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal

__all__ = [
    "CONSUMERS",
    "CONSUMER_DRIVER",
    "CONSUMER_MEDIA",
    "CONSUMER_PIPELINE",
    "HEADER_DL_BLOB",
    "HEADER_DL_CONSUMER",
    "HEADER_DL_DELIVERIES",
    "HEADER_DL_ERROR",
    "HEADER_DL_REASON",
    "HEADER_DL_SEQUENCE",
    "HEADER_DL_STREAM",
    "HEADER_DL_SUBJECT",
    "HEADER_MSG_ID",
    "HEADER_SCHEMA",
    "HEADER_TRACE",
    "HEADER_TYPE",
    "KEY_VALUES",
    "KV_FEISHU_CONTACT_NAMES",
    "KV_IDENTITY",
    "KV_INGRESS_DEDUP",
    "KV_LEASES",
    "KV_MEDIA_ALT_TEXTS",
    "KV_MEDIA_FILE_EXTRACTS",
    "KV_PLATFORM_BUDGET_CALLS",
    "KV_PLATFORM_BUDGET_MINUTES",
    "KV_RATE_LIMITS",
    "KV_TELEGRAM_CHAT_MIGRATIONS",
    "KV_TELEGRAM_SENT_LEDGER",
    "OBJECT_STORES",
    "OBJECT_STORE_BLOBS",
    "PARTITIONS",
    "QUEUE_ACTIONS",
    "QUEUE_LLM",
    "QUEUE_MEDIA",
    "QUEUE_PIPELINE",
    "SERVICE_PORTS",
    "STREAMS",
    "STREAM_CONTEXT",
    "STREAM_DEAD_LETTER",
    "STREAM_EVENTS",
    "STREAM_MEDIA",
    "SUBJECTS_CONTEXT",
    "SUBJECTS_DEAD_LETTER",
    "SUBJECTS_EVENTS",
    "SUBJECTS_MEDIA",
    "SUBJECT_LLM_GENERATE",
    "SUBJECT_LLM_TRANSCRIBE",
    "SUBJECT_MEDIA_READ_FILE",
    "SUBJECT_MEDIA_READ_IMAGE",
    "SUBJECT_PIPELINE_CURSOR",
    "SUBJECT_PIPELINE_HISTORY",
    "SUBJECT_PIPELINE_MEMBER",
    "SUBJECT_PIPELINE_SNAPSHOT",
    "ConsumerSpec",
    "KeyValueSpec",
    "ObjectStoreSpec",
    "Platform",
    "Service",
    "StreamSpec",
    "actions_subject",
    "asset_names",
    "context_subject",
    "dead_letter_subject",
    "events_subject",
    "fetch_subject",
    "identity_key",
    "media_job_subject",
    "media_result_subject",
    "msg_id",
    "partition_consumer",
    "partition_filter",
    "partition_of",
    "split_chat_subject",
    "subject_token",
    "typing_subject",
    "unescape_subject_token",
]


class Platform(StrEnum):
    FEISHU = "feishu"
    TELEGRAM = "telegram"


class Service(StrEnum):
    INGRESS_FEISHU = "ingress-feishu"
    INGRESS_TELEGRAM = "ingress-telegram"
    PIPELINE = "pipeline"
    DRIVER = "driver"
    MEDIA = "media"
    LLM_GATEWAY = "llm-gateway"


#: Operations port (``/healthz``, ``/readyz``, ``/metrics``) of each service (DESIGN §6).
SERVICE_PORTS: Final[dict[Service, int]] = {
    Service.INGRESS_FEISHU: 9101,
    Service.INGRESS_TELEGRAM: 9102,
    Service.PIPELINE: 9103,
    Service.DRIVER: 9104,
    Service.MEDIA: 9105,
    Service.LLM_GATEWAY: 9106,
}

# -- headers -------------------------------------------------------------------------------------------
HEADER_MSG_ID: Final = "Nats-Msg-Id"
HEADER_SCHEMA: Final = "Larkbot-Schema"
HEADER_TYPE: Final = "Larkbot-Type"
HEADER_TRACE: Final = "traceparent"
HEADER_DL_REASON: Final = "Larkbot-Dead-Letter-Reason"
HEADER_DL_ERROR: Final = "Larkbot-Dead-Letter-Error"
HEADER_DL_STREAM: Final = "Larkbot-Dead-Letter-Stream"
HEADER_DL_CONSUMER: Final = "Larkbot-Dead-Letter-Consumer"
HEADER_DL_SUBJECT: Final = "Larkbot-Dead-Letter-Subject"
HEADER_DL_SEQUENCE: Final = "Larkbot-Dead-Letter-Sequence"
HEADER_DL_DELIVERIES: Final = "Larkbot-Dead-Letter-Deliveries"
#: Set when the payload was too large for the record itself: the object-store key (``blobs``) holding it.
HEADER_DL_BLOB: Final = "Larkbot-Dead-Letter-Blob"

# Subject syntax characters, the escape character itself, whitespace, and the C0 controls and DEL (the
# server rejects NUL; the others would make logs and tooling misread a subject).
_ESCAPED: Final = frozenset(".*>% " + "".join(map(chr, range(0x20))) + "\x7f")
_PERCENT: Final = re.compile(r"%([0-9A-F]{2})")


def subject_token(value: str) -> str:
    """Escape an id for use as one subject token (percent-encoding of the few unsafe characters)."""
    if not value:
        raise ValueError("an empty id cannot be a subject token")
    if not any(ch in _ESCAPED for ch in value):
        return value
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


def unescape_subject_token(token: str) -> str:
    """Inverse of :func:`subject_token`."""
    if "%" not in token:
        return token
    return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), token)


# -- streams and subjects ------------------------------------------------------------------------------
STREAM_EVENTS: Final = "EVENTS"
STREAM_CONTEXT: Final = "CONTEXT"
STREAM_MEDIA: Final = "MEDIA"
STREAM_DEAD_LETTER: Final = "DEADLETTER"

SUBJECTS_EVENTS: Final = "events.>"
SUBJECTS_CONTEXT: Final = "context.>"
SUBJECTS_MEDIA: Final = "media.jobs.>"
SUBJECTS_DEAD_LETTER: Final = "deadletter.>"

SUBJECT_LLM_GENERATE: Final = "llm.generate"
SUBJECT_LLM_TRANSCRIBE: Final = "llm.transcribe"
SUBJECT_PIPELINE_SNAPSHOT: Final = "pipeline.snapshot"
SUBJECT_PIPELINE_HISTORY: Final = "pipeline.history"
SUBJECT_PIPELINE_CURSOR: Final = "pipeline.cursor"
SUBJECT_PIPELINE_MEMBER: Final = "pipeline.member"
SUBJECT_MEDIA_READ_IMAGE: Final = "media.read_image"
SUBJECT_MEDIA_READ_FILE: Final = "media.read_file"


def events_subject(platform: str, chat_id: str) -> str:
    return f"events.{subject_token(platform)}.{subject_token(chat_id)}"


def context_subject(platform: str, chat_id: str) -> str:
    return f"context.{subject_token(platform)}.{subject_token(chat_id)}"


def typing_subject(platform: str, chat_id: str) -> str:
    return f"typing.{subject_token(platform)}.{subject_token(chat_id)}"


def actions_subject(platform: str) -> str:
    return f"actions.{subject_token(platform)}"


def fetch_subject(platform: str) -> str:
    """Where an ingress serves only the read-only actions (downloads, custom emoji lookups): a service
    that may ask those but must not send anything on the platform (the media workers) is allowed this
    subject and not ``actions.<platform>`` (``larkbot.runtime.permissions``)."""
    return f"fetch.{subject_token(platform)}"


def media_job_subject(kind: str) -> str:
    return f"media.jobs.{subject_token(kind)}"


def media_result_subject(platform: str, chat_id: str) -> str:
    return f"media.results.{subject_token(platform)}.{subject_token(chat_id)}"


def dead_letter_subject(source: str, consumer: str) -> str:
    """``deadletter.<source>.<consumer>``, lower-case like every other subject: ``source`` is the stream a
    consumer read from (``EVENTS`` → ``deadletter.events.pipeline``) or the platform an ingress read from
    (``deadletter.feishu.ingress-feishu``). Stream names are upper-case and platforms lower-case, so the
    subject spells both one way; the record's ``Larkbot-Dead-Letter-Stream`` header keeps the name as
    given."""
    return f"deadletter.{subject_token(source.lower())}.{subject_token(consumer.lower())}"


def split_chat_subject(subject: str) -> tuple[str, str]:
    """``events.feishu.oc_1`` → ``("feishu", "oc_1")`` (also ``context.``/``typing.``, and the stored
    partitioned form ``events.<partition>.feishu.oc_1``)."""
    parts = subject.split(".")
    if len(parts) == 4 and parts[1].isdigit():
        parts = [parts[0], parts[2], parts[3]]
    if len(parts) != 3:
        raise ValueError(f"not a per-chat subject: {subject!r}")
    return unescape_subject_token(parts[1]), unescape_subject_token(parts[2])


# -- partitions ----------------------------------------------------------------------------------------
#: Chats are hashed into this many partitions (DESIGN §3 "Ordering and scale-out"). Fixed: changing it
#: moves chats between partitions, which needs a drained bus.
PARTITIONS: Final = 16


def partition_of(platform: str, chat_id: str) -> int:
    """The partition of a chat, as the streams' subject transform ``partition(N, 1, 2)`` computes it:
    FNV-1a 32 over the platform token and the chat token concatenated, modulo :data:`PARTITIONS`."""
    h = 0x811C9DC5
    for byte in (subject_token(platform) + subject_token(chat_id)).encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h % PARTITIONS


def partition_filter(prefix: str, partition: int) -> str:
    """The stored subjects of one partition of a partitioned stream: ``events.3.>``."""
    return f"{prefix}.{partition}.>"


def partition_consumer(durable: str, partition: int) -> str:
    """The durable consumer of one partition: ``pipeline-p03``."""
    return f"{durable}-p{partition:02d}"


def msg_id(platform: str, dedup_key: str) -> str:
    """``<platform>:<dedup_key>`` (DESIGN §3); an ingress appends the event's fingerprint
    (:func:`larkbot.canonical.fingerprint.event_msg_id`)."""
    return f"{platform}:{dedup_key}"


# -- durable consumers, queue groups, buckets ----------------------------------------------------------
CONSUMER_PIPELINE: Final = "pipeline"
CONSUMER_DRIVER: Final = "driver"
CONSUMER_MEDIA: Final = "media-workers"

#: The queue group of the ingress replicas, on ``actions.<platform>`` and ``fetch.<platform>`` alike.
QUEUE_ACTIONS: Final = "ingress"
QUEUE_LLM: Final = "llm-gateway"
QUEUE_PIPELINE: Final = "pipeline"
QUEUE_MEDIA: Final = "media"

KV_IDENTITY: Final = "identity"
KV_LEASES: Final = "leases"
KV_INGRESS_DEDUP: Final = "ingress-dedup"
KV_FEISHU_CONTACT_NAMES: Final = "feishu-contact-names"
KV_MEDIA_ALT_TEXTS: Final = "media-alt-texts"
KV_MEDIA_FILE_EXTRACTS: Final = "media-file-extracts"
KV_TELEGRAM_CHAT_MIGRATIONS: Final = "telegram-chat-migrations"
KV_TELEGRAM_SENT_LEDGER: Final = "telegram-sent-ledger"
KV_RATE_LIMITS: Final = "rate-limits"
KV_PLATFORM_BUDGET_MINUTES: Final = "platform-budget-minutes"
KV_PLATFORM_BUDGET_CALLS: Final = "platform-budget-calls"
OBJECT_STORE_BLOBS: Final = "blobs"


def identity_key(platform: str) -> str:
    """KV key under which an ingress publishes the bot's own identity for ``platform``."""
    return subject_token(platform)


@dataclass(frozen=True, slots=True)
class StreamSpec:
    name: str
    subjects: tuple[str, ...]
    work_queue: bool = False
    max_age_s: float = 0.0
    duplicate_window_s: float = 120.0
    max_msg_size: int = 8 * 1024 * 1024
    #: Store ``<prefix>.<platform>.<chat>`` as ``<prefix>.<partition>.<platform>.<chat>`` (subject transform).
    partitioned_prefix: str | None = None
    #: Bytes kept (``-1``: bounded by age only) and what happens at the limit: ``new`` refuses the publish
    #: (the producer keeps its input and tries again), ``old`` drops the oldest messages.
    max_bytes: int = -1
    discard: Literal["old", "new"] = "old"


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    stream: str
    durable: str
    filter_subject: str | None = None
    ack_wait_s: float = 30.0
    max_ack_pending: int = 1000
    max_deliver: int = -1


@dataclass(frozen=True, slots=True)
class KeyValueSpec:
    bucket: str
    ttl_s: float = 0.0
    history: int = 1
    max_bytes: int = -1


@dataclass(frozen=True, slots=True)
class ObjectStoreSpec:
    bucket: str
    #: Objects older than this are removed (``0``: never).
    ttl_s: float = 0.0
    max_bytes: int = -1


_DAY: Final = 24 * 3600.0
_GIB: Final = 1024**3

#: Everything the bus must hold, declared once; ``larkbot.runtime.bootstrap`` applies it idempotently.
STREAMS: Final[tuple[StreamSpec, ...]] = (
    # Events are kept in the stream for a week; the pipeline's table is the durable record.
    StreamSpec(STREAM_EVENTS, (SUBJECTS_EVENTS,), max_age_s=7 * _DAY, partitioned_prefix="events"),
    StreamSpec(STREAM_CONTEXT, (SUBJECTS_CONTEXT,), max_age_s=1 * _DAY, partitioned_prefix="context"),
    # Bounded so that a stalled media queue cannot fill the disk that EVENTS needs: at the limit a job is
    # refused, and the pipeline submits it again once workers have drained some.
    StreamSpec(STREAM_MEDIA, (SUBJECTS_MEDIA,), work_queue=True, max_bytes=1 * _GIB, discard="new"),
    # A dead letter refused at the limit leaves its input unacknowledged: it comes back, nothing is lost.
    StreamSpec(
        STREAM_DEAD_LETTER, (SUBJECTS_DEAD_LETTER,), max_age_s=30 * _DAY, max_bytes=1 * _GIB, discard="new"
    ),
)
#: Durable consumers the bootstrap declares. The partitioned consumers of EVENTS (``pipeline-pNN``) and
#: CONTEXT (``driver-pNN``) are declared by their owners when they take a partition, because where
#: consumption starts is the owner's state (see the pipeline's and driver's docs).
CONSUMERS: Final[tuple[ConsumerSpec, ...]] = (
    ConsumerSpec(STREAM_MEDIA, CONSUMER_MEDIA, SUBJECTS_MEDIA, ack_wait_s=120.0),
)
KEY_VALUES: Final[tuple[KeyValueSpec, ...]] = (
    KeyValueSpec(KV_IDENTITY),
    KeyValueSpec(KV_LEASES, ttl_s=15.0),
    KeyValueSpec(KV_INGRESS_DEDUP, ttl_s=9 * 3600.0),
    # Contact names of ingress-feishu, shared by its replicas: no TTL (an expired name would come back as
    # the open_id, a false rename); entries are refreshed, never dropped, by the contact API.
    KeyValueSpec(KV_FEISHU_CONTACT_NAMES),
    # Alt texts by content hash: worth keeping (a picture is described once), so no TTL.
    KeyValueSpec(KV_MEDIA_ALT_TEXTS),
    # Text extracts of documents by content hash (and what was refused in them), for read_file: a file
    # asked about once is often asked about again; 30 days like the blobs they come from.
    KeyValueSpec(KV_MEDIA_FILE_EXTRACTS, ttl_s=30 * _DAY),
    # Telegram groups upgraded to supergroups (key: the group's id, value: the supergroup's): a chat
    # continues under its configured id for as long as it lives, so no TTL.
    KeyValueSpec(KV_TELEGRAM_CHAT_MIGRATIONS),
    # The sent-ledger of Telegram sends, shared by ingress-telegram's replicas: a record matters until
    # the driver stops asking about its action (minutes); a week is the retention.
    KeyValueSpec(KV_TELEGRAM_SENT_LEDGER, ttl_s=7 * _DAY),
    # The driver's rate-limit windows (a person's wake-ups, a chat's turns), shared by its replicas and
    # kept across restarts. A record matters for at most its longest window plus its cooldown (each at
    # most a day, ``runtime.config.RATE_WINDOW_MAX_S``) after its last write; two days is the retention.
    KeyValueSpec(KV_RATE_LIMITS, ttl_s=2 * _DAY),
    # Platform budgets (larkbot.runtime.budgets), written by the ingress replicas with compare-and-set and
    # read by the driver. A chat's sends of the last minute: a key not written for two minutes holds
    # nothing that still counts.
    KeyValueSpec(KV_PLATFORM_BUDGET_MINUTES, ttl_s=120.0),
    # A platform's API calls of the current UTC day and month, one key: written at least once in a month
    # it counts, so 32 days outlive the longest month.
    KeyValueSpec(KV_PLATFORM_BUDGET_CALLS, ttl_s=32 * _DAY),
)
#: Media bytes by content hash. Bounded in age and size: a picture older than the events that show it
#: is not asked for again, and one gone is described as unavailable (docs/media.md).
OBJECT_STORES: Final[tuple[ObjectStoreSpec, ...]] = (
    ObjectStoreSpec(OBJECT_STORE_BLOBS, ttl_s=30 * _DAY, max_bytes=4 * _GIB),
)


def asset_names() -> frozenset[str]:
    """Every stream, KV bucket and object store of the bus, by the name configuration uses."""
    return frozenset(
        [s.name for s in STREAMS] + [kv.bucket for kv in KEY_VALUES] + [o.bucket for o in OBJECT_STORES]
    )
