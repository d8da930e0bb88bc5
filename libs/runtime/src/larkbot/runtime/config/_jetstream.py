"""Replication and limits of what the bus holds (``jetstream``).

Every stream, KV bucket and object store is declared in ``larkbot.canonical.names`` with its default
limits; this section sets, per asset, how many replicas it keeps and how large or old it may grow. The
bootstrap creates a missing asset with these values and raises an existing one's replicas when the
configuration asks for more, but never lowers replicas or loosens a limit an operator set
(:mod:`larkbot.runtime.bootstrap`, docs/deployment.md "Replicas and limits").
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from larkbot.canonical.names import asset_names

from ._base import _problems, _Section


class AssetSettings(_Section):
    """One asset's replicas and limits; an unset key takes ``jetstream.replicas`` or the declared limit."""

    replicas: int | None = Field(default=None, ge=1, le=5)
    #: Oldest message kept, in seconds (``0``: no age limit).
    max_age_s: float | None = Field(default=None, ge=0)
    #: Bytes kept (``-1``: no byte limit).
    max_bytes: int | None = Field(default=None, ge=-1)
    #: At a limit, ``new`` refuses the publish (the producer gets an error and keeps its input), ``old``
    #: drops the oldest messages.
    discard: Literal["old", "new"] | None = None

    @model_validator(mode="after")
    def _bytes_not_zero(self) -> AssetSettings:
        if self.max_bytes == 0:
            raise ValueError("max_bytes 0 would hold nothing; -1 means no byte limit")
        return self


class JetStreamSettings(_Section):
    #: Replicas of every asset without its own ``replicas`` (1 on a single server, 3 on a 3-node cluster).
    replicas: int = Field(default=1, ge=1, le=5)
    #: Per asset, by its name: a stream (``EVENTS``, ``CONTEXT``, ``MEDIA``, ``DEADLETTER``), a KV bucket
    #: (``leases``, …) or an object store (``blobs``).
    assets: dict[str, AssetSettings] = Field(default_factory=dict)
    #: How long the bootstrap waits out a cluster that is electing a leader or moving replicas.
    election_wait_s: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _assets_known(self) -> JetStreamSettings:
        known = asset_names()
        found: list[tuple[tuple[str | int, ...], str, Any]] = [
            (("assets", name), f"not an asset of the bus (one of {', '.join(sorted(known))})", None)
            for name in self.assets
            if name not in known
        ]
        if found:
            raise _problems("jetstream", found)
        return self

    def for_asset(self, name: str) -> AssetSettings:
        """``name``'s own settings with ``replicas`` filled in."""
        own = self.assets.get(name, AssetSettings())
        return own if own.replicas is not None else own.model_copy(update={"replicas": self.replicas})
