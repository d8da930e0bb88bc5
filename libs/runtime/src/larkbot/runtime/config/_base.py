"""What every section shares: frozen, closed models, problems reported under their exact key, user ids."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, SecretStr, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _user_id(value: str) -> str:
    trimmed = value.strip()
    if not trimmed:
        raise PydanticCustomError("empty_id", "a user id must not be empty")
    return trimmed


def _secret_given(value: SecretStr) -> SecretStr:
    # An unset ``${NAME:-}`` leaves a secret empty: a service would start and fail at its first call.
    if not value.get_secret_value().strip():
        raise PydanticCustomError(
            "empty_secret", "the secret is empty: give it a value, or leave the key out"
        )
    return value


#: A secret that, when given, is not empty (``FEISHU_APP_SECRET=`` is refused, naming the key).
Secret = Annotated[SecretStr, AfterValidator(_secret_given)]


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
