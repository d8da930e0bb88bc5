"""What each service may publish and subscribe to on NATS: the permissions of an optional user per service.

A deployment may give every service its own NATS user (``nats.user`` / ``nats.password`` from that
service's environment) instead of one shared token; the server then refuses a service's publish or
subscription outside its subjects, so a compromised media worker cannot send a platform message or read
another service's requests. The media worker still needs the ingresses for its downloads and custom
emoji lookups: it asks them on ``fetch.<platform>``, where an ingress runs only read-only actions
(``larkbot.runtime.ingress.fetch_endpoint``), and only the driver may publish on ``actions.>``.

:func:`authorization_conf` renders the ``authorization`` block of ``nats.conf`` (``larkbot nats-users``
prints it; ``deploy/nats/users.conf`` is its output), with each password read from the server's
environment.

Every service may:

- use the part of the JetStream API that declaring and reading assets takes (:data:`_JS_API`): stream
  info, create and update, message and direct gets, and the consumer API. Not stream deletion, purge
  (but the object store's, for the services that write blobs: nats-py purges an object's old chunks
  when it is written again), message deletion, snapshots, restores, peer removal or leader step-down.
  This stays the one broad grant, over every stream rather than each service's own, because every
  service declares all assets at start-up (:func:`.bootstrap.bootstrap`: the info of every stream, the
  create-or-update of every consumer) and the pipeline and driver declare readers and partition
  consumers at run time under names of their state's choosing; narrowing it per stream means declaring
  assets only in the init job;
- acknowledge what it consumes (``$JS.ACK.>``) and receive replies and deliveries on its own inboxes
  (``_INBOX.>``);
- answer the requests it serves (``allow_responses``), without a grant on the requesters' inboxes.

Beyond that, each publishes and subscribes only to its own subjects (the table is :data:`PERMISSIONS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from larkbot.canonical.names import (
    KV_FEISHU_CONTACT_NAMES,
    KV_IDENTITY,
    KV_INGRESS_DEDUP,
    KV_LEASES,
    KV_MEDIA_ALT_TEXTS,
    KV_MEDIA_FILE_EXTRACTS,
    KV_PLATFORM_BUDGET_CALLS,
    KV_PLATFORM_BUDGET_MINUTES,
    KV_RATE_LIMITS,
    KV_TELEGRAM_CHAT_MIGRATIONS,
    KV_TELEGRAM_SENT_LEDGER,
    OBJECT_STORE_BLOBS,
    SUBJECT_LLM_GENERATE,
    SUBJECT_LLM_TRANSCRIBE,
    SUBJECT_MEDIA_READ_FILE,
    SUBJECT_MEDIA_READ_IMAGE,
    Platform,
    Service,
    actions_subject,
    fetch_subject,
)

__all__ = ["BOOTSTRAP", "PERMISSIONS", "Permissions", "authorization_conf", "password_variable", "users_conf"]

#: The user name of the init job's ``larkbot bootstrap``.
BOOTSTRAP: Final = "bootstrap"

#: The JetStream API subjects every service may call (the module docstring says why not fewer).
_JS_API: Final = (
    "$JS.API.INFO",
    "$JS.API.STREAM.NAMES",
    "$JS.API.STREAM.LIST",
    "$JS.API.STREAM.INFO.*",
    "$JS.API.STREAM.CREATE.*",
    "$JS.API.STREAM.UPDATE.*",
    "$JS.API.STREAM.MSG.GET.*",
    "$JS.API.DIRECT.GET.>",
    "$JS.API.CONSUMER.>",
)
_EVERYONE_PUBLISH: Final = (*_JS_API, "$JS.ACK.>")
_EVERYONE_SUBSCRIBE: Final = ("_INBOX.>",)
_DEAD_LETTERS: Final = "deadletter.>"


def _kv(bucket: str) -> str:
    return f"$KV.{bucket}.>"


def _objects(bucket: str) -> str:
    return f"$O.{bucket}.>"


@dataclass(frozen=True, slots=True)
class Permissions:
    """A user's own subjects, beyond what every service may (the module docstring)."""

    publish: tuple[str, ...] = ()
    subscribe: tuple[str, ...] = ()
    #: It serves requests: it may publish to the reply subject of a request it received.
    responds: bool = False

    def publish_allowed(self) -> tuple[str, ...]:
        return (*_EVERYONE_PUBLISH, *self.publish)

    def subscribe_allowed(self) -> tuple[str, ...]:
        return (*_EVERYONE_SUBSCRIBE, *self.subscribe)


#: Writing to the blob store: its subjects, and purging an object's old chunks (nats-py's ``put``).
_BLOBS: Final = (_objects(OBJECT_STORE_BLOBS), f"$JS.API.STREAM.PURGE.OBJ_{OBJECT_STORE_BLOBS}")

#: Booking platform budgets (``larkbot.runtime.budgets``): the ingress services only; the driver reads
#: them through the direct get every service may.
_BUDGETS: Final = (_kv(KV_PLATFORM_BUDGET_MINUTES), _kv(KV_PLATFORM_BUDGET_CALLS))

#: Each service's own subjects, by user name (the service's name; ``bootstrap`` for the init job).
PERMISSIONS: Final[dict[str, Permissions]] = {
    Service.INGRESS_FEISHU.value: Permissions(
        publish=(
            "events.feishu.>",
            _DEAD_LETTERS,
            _kv(KV_INGRESS_DEDUP),
            _kv(KV_FEISHU_CONTACT_NAMES),
            _kv(KV_IDENTITY),
            *_BUDGETS,
            *_BLOBS,
        ),
        subscribe=(actions_subject(Platform.FEISHU), fetch_subject(Platform.FEISHU)),
        responds=True,
    ),
    Service.INGRESS_TELEGRAM.value: Permissions(
        publish=(
            "events.telegram.>",
            "typing.telegram.>",
            _DEAD_LETTERS,
            _kv(KV_INGRESS_DEDUP),
            _kv(KV_TELEGRAM_SENT_LEDGER),
            _kv(KV_TELEGRAM_CHAT_MIGRATIONS),
            _kv(KV_IDENTITY),
            *_BUDGETS,
            *_BLOBS,
        ),
        subscribe=(actions_subject(Platform.TELEGRAM), fetch_subject(Platform.TELEGRAM)),
        responds=True,
    ),
    Service.PIPELINE.value: Permissions(
        publish=("context.>", "media.jobs.>", _DEAD_LETTERS, _kv(KV_LEASES), *_BLOBS),
        subscribe=("pipeline.>", "media.results.>"),
        responds=True,
    ),
    Service.DRIVER.value: Permissions(
        publish=(
            SUBJECT_LLM_GENERATE,
            "actions.>",
            SUBJECT_MEDIA_READ_IMAGE,
            SUBJECT_MEDIA_READ_FILE,
            "pipeline.>",
            _DEAD_LETTERS,
            _kv(KV_LEASES),
            _kv(KV_RATE_LIMITS),
        ),
        subscribe=("typing.>",),
    ),
    Service.MEDIA.value: Permissions(
        publish=(
            "media.results.>",
            # Downloads and custom emoji from the ingresses: read-only actions, never actions.>.
            "fetch.>",
            SUBJECT_LLM_GENERATE,
            SUBJECT_LLM_TRANSCRIBE,
            _DEAD_LETTERS,
            _kv(KV_MEDIA_ALT_TEXTS),
            _kv(KV_MEDIA_FILE_EXTRACTS),
            *_BLOBS,
        ),
        subscribe=(SUBJECT_MEDIA_READ_IMAGE, SUBJECT_MEDIA_READ_FILE),
        responds=True,
    ),
    # The gateway reads the audio a transcription names from the blob store (an ordered consumer on
    # _INBOX, which every service may), and writes nothing there.
    Service.LLM_GATEWAY.value: Permissions(
        subscribe=(SUBJECT_LLM_GENERATE, SUBJECT_LLM_TRANSCRIBE), responds=True
    ),
    BOOTSTRAP: Permissions(),
}


def password_variable(user: str) -> str:
    """The environment variable of the NATS server holding ``user``'s password:
    ``NATS_PASSWORD_INGRESS_FEISHU``."""
    return "NATS_PASSWORD_" + user.upper().replace("-", "_")


def _list(subjects: tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{s}"' for s in subjects) + "]"


def authorization_conf(password: Callable[[str], str] = lambda user: f"${password_variable(user)}") -> str:
    """The ``authorization`` block of ``nats.conf``: one user per service with its permissions.
    ``password(user)`` is what the file says for the password (an environment reference by default)."""
    lines = ["authorization {", "  users: ["]
    for user, permissions in PERMISSIONS.items():
        responses = "\n        allow_responses: true" if permissions.responds else ""
        lines.append(
            f'    {{\n      user: "{user}"\n      password: {password(user)}\n      permissions: {{\n'
            f"        publish: {{ allow: {_list(permissions.publish_allowed())} }}\n"
            f"        subscribe: {{ allow: {_list(permissions.subscribe_allowed())} }}"
            f"{responses}\n      }}\n    }}"
        )
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


_HEADER: Final = """\
# Generated by `larkbot nats-users` (larkbot.runtime.permissions): one NATS user per service, each allowed
# only its own subjects. To use it instead of the shared token, replace the `authorization` block of
# nats.conf with `include users.conf`, set each NATS_PASSWORD_<SERVICE> for the server and give each
# service `nats.user` / `nats.password` (docs/deployment.md "NATS users per service").
"""


def users_conf() -> str:
    """``deploy/nats/users.conf``: the authorization block with the passwords from the server's
    environment, and how to use it."""
    return _HEADER + authorization_conf()
