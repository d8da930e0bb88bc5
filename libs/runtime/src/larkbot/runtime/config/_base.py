"""What every section shares: frozen, closed models, problems reported under their exact key, user ids."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _user_id(value: str) -> str:
    trimmed = value.strip()
    if not trimmed:
        raise PydanticCustomError("empty_id", "a user id must not be empty")
    return trimmed


def _problems(title: str, found: list[tuple[tuple[str | int, ...], str, Any]]) -> ValidationError:
    """One validation error per ``(location, message, input)``: pydantic prefixes each location with the
    field's or model's own, so a problem names its exact key (``maintainers.1``)."""
    return ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(type=PydanticCustomError("invalid", msg), loc=loc, input=value)
            for loc, msg, value in found
        ],
    )


def _unique_ids(ids: tuple[str, ...]) -> tuple[str, ...]:
    first: dict[str, int] = {}
    found: list[tuple[tuple[str | int, ...], str, Any]] = []
    for index, user_id in enumerate(ids):
        seen = first.setdefault(user_id, index)
        if seen != index:
            found.append(((index,), f"duplicates the id at index {seen}", user_id))
    if found:
        raise _problems("user ids", found)
    return ids


#: Platform user ids from trusted configuration (Feishu ``ou_…`` open_ids, Telegram user ids as strings):
#: each trimmed and non-empty, none twice.
UserIds = Annotated[tuple[Annotated[str, AfterValidator(_user_id)], ...], AfterValidator(_unique_ids)]
