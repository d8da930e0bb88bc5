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
