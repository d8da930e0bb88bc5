"""Encoding of wire models as JSON with a schema-version header.

Every payload on the bus is the JSON of one :mod:`larkbot.canonical` model. Two headers travel with it:
``Larkbot-Schema`` (the integer :data:`SCHEMA_VERSION`) and ``Larkbot-Type`` (the model's name). A reader
refuses a version it does not know and, in :func:`decode`, a type it did not ask for, with a
:class:`ContractError`, which the consume loop turns into a dead-letter record. :func:`decode_as` reads a
union (events, actions, LLM replies) whose member names differ from the union's, so it checks the version
only; the discriminator then decides the type.

Error messages name locations and rules, never input values: payloads carry user text and may carry
secrets, and these messages end up in logs and dead-letter headers.
"""

from __future__ import annotations

from typing import Final, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from .errors import DecodeError, SchemaVersionError
from .names import HEADER_SCHEMA, HEADER_TYPE

__all__ = ["SCHEMA_VERSION", "check_version", "decode", "decode_as", "encode", "headers_for"]

SCHEMA_VERSION: Final = 1

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

_MAX_ERRORS: Final = 5
_MAX_LOC_PART: Final = 64


def encode(model: BaseModel) -> bytes:
    """Serialize deterministically: field order is declaration order, no whitespace, ``None`` kept."""
    return model.model_dump_json(exclude_none=False).encode()


def headers_for(model: BaseModel, extra: dict[str, str] | None = None) -> dict[str, str]:
    headers = {HEADER_SCHEMA: str(SCHEMA_VERSION), HEADER_TYPE: type(model).__name__}
    if extra:
        headers.update(extra)
    return headers


def check_version(headers: dict[str, str] | None) -> None:
    found = (headers or {}).get(HEADER_SCHEMA)
    if found != str(SCHEMA_VERSION):
        raise SchemaVersionError(found, SCHEMA_VERSION)


def decode(data: bytes, model: type[M], headers: dict[str, str] | None = None) -> M:
    """Decode ``data`` as ``model``; with ``headers``, also check the schema version and, when present,
    that the type header names ``model``."""
    if headers is not None:
        check_version(headers)
        declared = headers.get(HEADER_TYPE)
        if declared is not None and declared != model.__name__:
            raise DecodeError(f"payload is declared as another type, expected {model.__name__}")
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise DecodeError(f"payload is not a valid {model.__name__}: {_summary(exc)}") from None


def decode_as(data: bytes, adapter: TypeAdapter[T], headers: dict[str, str] | None = None) -> T:
    """Decode ``data`` through a :class:`TypeAdapter` (for discriminated unions)."""
    if headers is not None:
        check_version(headers)
    try:
        return adapter.validate_json(data)
    except ValidationError as exc:
        raise DecodeError(f"payload is not valid: {_summary(exc)}") from None


def _summary(exc: ValidationError) -> str:
    parts = [_describe(err) for err in exc.errors(include_url=False, include_input=False)[:_MAX_ERRORS]]
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _describe(err: ErrorDetails) -> str:
    # A location part is a field name, an index or a (valid) discriminator tag; an unknown field's name
    # comes from the input, hence the length cap.
    loc = ".".join(str(p)[:_MAX_LOC_PART] for p in err["loc"]) or "<root>"
    if err["type"] == "union_tag_invalid":
        # pydantic's message quotes the offending tag, which is input.
        expected = (err.get("ctx") or {}).get("expected_tags", "?")
        return f"{loc}: unknown discriminator value (expected one of {expected})"
    return f"{loc}: {err['msg']}"
