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


class LarkbotError(Exception):
    """Base of every error LarkBot raises on purpose."""


class ConfigError(LarkbotError):
    """Invalid configuration. ``path`` is the dotted key path (``chats.default.probe.timeout_s``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


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
