"""Deployment-wide settings of the driver's features (``memory``, ``shell``, ``audit``)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from ._base import _Section


class MemorySettings(_Section):
    """Deployment-wide memory settings (docs/memory.md)."""

    #: Whether ``global`` memories exist here: saved with scope ``global`` and used in every chat of the
    #: platform. Off by default: a fact learnt in one group stays in that group.
    global_scope: bool = False
    #: Consolidation: per person and scope, many ``normal`` memories are merged by the ``memory`` model
    #: (else ``compaction``, else ``primary``) into fewer ``high`` ones; the originals are disabled.
    consolidation_enabled: bool = True
    consolidation_interval_s: float = Field(default=3600.0, gt=0)
    consolidation_min_count: int = Field(default=12, ge=2)
    #: The most memories one consolidation call reads.
    consolidation_max_batch: int = Field(default=60, ge=2, le=500)
    consolidation_retry_initial_s: float = Field(default=600.0, gt=0)
    consolidation_retry_max_s: float = Field(default=86400.0, gt=0)
    consolidation_timeout_s: float = Field(default=120.0, gt=0)

    @model_validator(mode="after")
    def _retry_consistent(self) -> MemorySettings:
        if self.consolidation_retry_max_s < self.consolidation_retry_initial_s:
            raise ValueError("consolidation_retry_max_s must be at least consolidation_retry_initial_s")
        if self.consolidation_max_batch < self.consolidation_min_count:
            raise ValueError("consolidation_max_batch must be at least consolidation_min_count")
        return self


_SHELL_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Set by the driver for every command; not passed through.
_SHELL_ENV_RESERVED = frozenset({"PATH", "HOME"})


class ShellSettings(_Section):
    """Deployment-wide settings of the shell tools (``bash``, ``kill_task``, ``read_task_output``;
    docs/driver.md "Shell tools"). A chat uses them only with ``shell_enabled``. Not a sandbox."""

    #: The shell a command runs in (``<executable> <file holding the command>``).
    executable: str = "/bin/bash"
    #: The commands' working directory (shared by every command; default ``<data_dir>/shell/work``).
    working_dir: str | None = None
    #: Where each task's output and exit status are kept (default ``<data_dir>/shell/tasks``).
    output_dir: str | None = None
    #: ``PATH`` of the commands. Their environment is built from scratch: ``PATH``, ``HOME`` (the working
    #: directory), ``LANG``, and only the variables named in ``env_passthrough``, copied from the driver's.
    path: str = Field(default="/usr/local/bin:/usr/bin:/bin", min_length=1)
    env_passthrough: tuple[str, ...] = ()
    #: The longest a ``bash`` call waits (its ``timeout_seconds`` and the turn's deadline bound it too);
    #: a command still running then continues as a background task.
    max_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    #: Bytes of output in a tool result (head and tail kept around a marker); also the most one
    #: ``read_task_output`` call returns.
    max_output_bytes: int = Field(default=4000, ge=200, le=100_000)
    #: Bytes of the output's tail in a task's completion event.
    event_output_bytes: int = Field(default=1000, ge=0, le=20_000)
    #: Background tasks running at once on one host; a ``bash`` call beyond it is refused.
    max_tasks: int = Field(default=4, ge=1, le=100)
    #: Finished tasks' rows and output files are removed this many days after they finished.
    retention_days: float = Field(default=7.0, gt=0)
    #: How often running tasks are looked at (their completion is announced within about this).
    poll_interval_s: float = Field(default=1.0, gt=0, le=60)
    #: ``kill_task`` sends SIGTERM to the task's process group, then SIGKILL after this long.
    kill_grace_s: float = Field(default=3.0, ge=0, le=60)

    @field_validator("env_passthrough")
    @classmethod
    def _env_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if not _SHELL_ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if name in _SHELL_ENV_RESERVED:
                raise ValueError(f"{name} is set by the driver (shell.path, the working directory)")
            if name.startswith("LARKBOT_"):
                raise ValueError(f"{name}: the service's own variables are never passed to commands")
        if len(set(names)) != len(names):
            raise ValueError("names must be unique")
        return names


class AuditSettings(_Section):
    """The per-wake-up audit trail (``driver_wakeups``) and request log (``driver_requests``; docs/driver.md
    "Audit trail")."""

    enabled: bool = True
    #: ``False``: the audit record keeps the probe's reason as its sha256 (``sha256:<hex>``), not the
    #: text, and the request log keeps only the hashes of the requests' blocks, not their texts.
    store_content: bool = True
    #: Audit records, logged requests and sent message ids older than this are deleted (and nothing else).
    retention_days: float = Field(default=30.0, gt=0)
