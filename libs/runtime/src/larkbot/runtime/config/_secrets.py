"""Which service receives which secret: each process validates and holds only its own.

A service loads the configuration as its own view (``load_config(..., service=...)``): every secret it
does not own is replaced, before ``${NAME}`` interpolation, by :data:`WITHHELD` — so the variable need not
be in its environment (a Kubernetes Secret or a compose ``env_file`` per service), and the value never
reaches its memory, logs or dumps even where the environment does hold it. ``larkbot config check``
validates the whole file, every secret included.

=====================================================  ============================================
secret                                                 received by
=====================================================  ============================================
``nats.token``, ``nats.password``                      every service and ``larkbot bootstrap``
``feishu.app_secret``, ``.verification_token``,        ingress-feishu
``.encrypt_key``
``telegram.bot_token``, ``.webhook_secret``            ingress-telegram
``llm.endpoints.*.api_key``, ``llm.prompt_cache_key    llm-gateway
_salt``
``services.pipeline.database_url``                     pipeline
``services.driver.database_url``                       driver and the inspector
``inspector.access_token``                             the inspector
=====================================================  ============================================

The media worker, which decodes untrusted images, receives only the NATS credentials.

Sections follow the same rule: a service's view holds only the top-level sections it reads
(:data:`SECTIONS`), so a section it never reads can neither stop it (a broken ``telegram:`` does not keep
the media worker from starting) nor ask its environment for variables (``${FEISHU_APP_ID}``). Keys the
configuration does not define stay in every view, so a misspelt section is refused everywhere. A
process without a row (the inspector, ``larkbot config check``) validates every section.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

#: What a withheld secret reads as: non-empty (so the section validates), never a usable credential.
WITHHELD: Final = "withheld-from-this-service"

_EVERYONE: Final = "*"

#: (path pattern, who receives it); ``*`` in a pattern matches one key.
SECRET_OWNERS: Final[tuple[tuple[tuple[str, ...], frozenset[str]], ...]] = (
    (("nats", "token"), frozenset({_EVERYONE})),
    (("nats", "password"), frozenset({_EVERYONE})),
    (("feishu", "app_secret"), frozenset({"ingress-feishu"})),
    (("feishu", "verification_token"), frozenset({"ingress-feishu"})),
    (("feishu", "encrypt_key"), frozenset({"ingress-feishu"})),
    (("telegram", "bot_token"), frozenset({"ingress-telegram"})),
    (("telegram", "webhook_secret"), frozenset({"ingress-telegram"})),
    (("llm", "endpoints", "*", "api_key"), frozenset({"llm-gateway"})),
    (("llm", "prompt_cache_key_salt"), frozenset({"llm-gateway"})),
    (("services", "pipeline", "database_url"), frozenset({"pipeline"})),
    (("services", "driver", "database_url"), frozenset({"driver", "inspector"})),
    (("inspector", "access_token"), frozenset({"inspector"})),
)


_COMMON: Final = frozenset({"nats", "jetstream", "data_dir", "utc_offset_min", "services", "retry"})
_CHATS: Final = frozenset({"chats", "maintainers"})

#: The top-level sections each process reads (found from what its code reads of the configuration).
SECTIONS: Final[dict[str, frozenset[str]]] = {
    "bootstrap": _COMMON,
    "media": _COMMON | {"llm"},
    "llm-gateway": _COMMON | {"llm"},
    "ingress-feishu": _COMMON | _CHATS | {"feishu"},
    "ingress-telegram": _COMMON | _CHATS | {"telegram"},
    # llm: the routes and purposes that name the endpoints of a chat's media jobs (vision, transcription).
    "pipeline": _COMMON | _CHATS | {"llm"},
    "driver": _COMMON | _CHATS | {"llm", "memory", "shell", "audit", "dry_run"},
}


def sections_of(raw: Mapping[str, Any], service: str, defined: frozenset[str]) -> dict[str, Any]:
    """``raw`` without the sections of ``defined`` that ``service`` does not read (:data:`SECTIONS`)."""
    reads = SECTIONS.get(service)
    if reads is None:
        return dict(raw)
    return {key: value for key, value in raw.items() if key in reads or key not in defined}


def owners_of(path: tuple[str, ...]) -> frozenset[str] | None:
    """Who receives the secret at ``path``; ``None`` when ``path`` is not a secret."""
    for pattern, owners in SECRET_OWNERS:
        if len(pattern) == len(path) and all(p in ("*", k) for p, k in zip(pattern, path, strict=True)):
            return owners
    return None


def withhold(raw: Any, service: str, path: tuple[str, ...] = ()) -> Any:
    """``raw`` (the file as read, before interpolation) with every secret ``service`` does not own
    replaced by :data:`WITHHELD`."""
    if isinstance(raw, Mapping):
        out: dict[Any, Any] = {}
        for key, value in raw.items():
            here = (*path, str(key).replace("_", "-") if path == ("services",) else str(key))
            owners = owners_of(here)
            if owners is not None and value is not None and not ({service, _EVERYONE} & owners):
                out[key] = WITHHELD
            else:
                out[key] = withhold(value, service, here)
        return out
    return raw
