"""The one exception tree of LarkBot.

::

    LarkbotError
    ├── ConfigError            invalid configuration; carries the dotted path of the bad key
    ├── ContractError          a payload that does not fit the wire contract (never retried)
    │   ├── DecodeError        not JSON / not the model named in the header
    │   └── SchemaVersionError produced by an incompatible schema version
    ├── RetryableError         a transient failure; the message is redelivered after ``delay_s``
    └── PermanentError         a well-formed message that can never succeed (poison); dead-lettered

The consume loop (``larkbot.runtime``) maps these to JetStream acknowledgements in exactly one place:
``RetryableError`` → nak with delay; ``ContractError`` / ``PermanentError`` → term + dead-letter record;
success → ack. Lower-layer exceptions (nats, sqlalchemy, httpx) are translated at each service's edge.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ConfigError",
    "ContractError",
    "DecodeError",
    "LarkbotError",
    "PermanentError",
    "RetryableError",
    "SchemaVersionError",
]


class LarkbotError(Exception):
    """Base of every error LarkBot raises on purpose."""


class ConfigError(LarkbotError):
    """Invalid configuration: every problem found, each with the dotted path of its key
    (``chats.default.probe_timeout_s``). ``path`` and ``message`` are the first problem's; ``file`` is the
    configuration file the problems are in, when one was read."""

    def __init__(
        self,
        path: str,
        message: str,
        *,
        more: Sequence[tuple[str, str]] = (),
        file: str | None = None,
    ) -> None:
        self.problems: tuple[tuple[str, str], ...] = ((path, message), *more)
        self.path = path
        self.message = message
        self.file = file
        where = f"{file}: " if file else ""
        super().__init__(where + "; ".join(f"{p}: {m}" if p else m for p, m in self.problems))

    def in_file(self, file: str) -> ConfigError:
        """The same problems, attributed to ``file``."""
        return ConfigError(self.path, self.message, more=self.problems[1:], file=file)

    def report(self) -> str:
        """For a terminal: where, then one problem per line when there are several."""
        where = f"{self.file}: invalid configuration" if self.file else "invalid configuration"
        lines = [f"{p}: {m}" if p else m for p, m in self.problems]
        if len(lines) == 1:
            return f"{where}: {lines[0]}"
        return f"{where} ({len(lines)} problems):\n" + "\n".join(f"  {line}" for line in lines)


class ContractError(LarkbotError):
    """A payload that does not satisfy the wire contract. Redelivery cannot fix it."""


class DecodeError(ContractError):
    """The bytes are not valid JSON of the declared model."""


class SchemaVersionError(ContractError):
    """The payload was written with a schema version this code does not read."""

    def __init__(self, found: str | None, expected: int) -> None:
        super().__init__(f"schema version {found!r} is not readable (expected {expected})")
        self.found = found
        self.expected = expected


class RetryableError(LarkbotError):
    """A transient failure: try the same message again after ``delay_s`` seconds."""

    def __init__(self, message: str, *, delay_s: float = 1.0) -> None:
        super().__init__(message)
        self.delay_s = delay_s


class PermanentError(LarkbotError):
    """A well-formed message that can never be processed (poison): dead-letter it with the reason."""
