"""Typed reads of raw Bot API JSON: each accessor names the field path when the payload is wrong.

The adapter works on the raw ``Update`` mapping (what ``getUpdates`` or a webhook delivered), not on
a client library's models, so replay reads the same bytes the live service read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .errors import MalformedUpdate


class Obj:
    """A JSON object at a known path."""

    __slots__ = ("path", "raw")

    def __init__(self, raw: Any, path: str) -> None:
        if not isinstance(raw, Mapping):
            raise MalformedUpdate(path, f"expected an object, got {_kind(raw)}")
        self.raw: Mapping[str, Any] = raw
        self.path = path

    def has(self, key: str) -> bool:
        return key in self.raw and self.raw[key] is not None

    def _at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def int_(self, key: str) -> int:
        value = self.raw.get(key)
        if value is None:
            raise MalformedUpdate(self._at(key), "required integer is missing")
        return _int(value, self._at(key))

    def opt_int(self, key: str) -> int | None:
        value = self.raw.get(key)
        return None if value is None else _int(value, self._at(key))

    def str_(self, key: str) -> str:
        value = self.raw.get(key)
        if value is None:
            raise MalformedUpdate(self._at(key), "required string is missing")
        return _str(value, self._at(key))

    def opt_str(self, key: str) -> str | None:
        value = self.raw.get(key)
        return None if value is None else _str(value, self._at(key))

    def bool_(self, key: str, default: bool = False) -> bool:
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise MalformedUpdate(self._at(key), f"expected a boolean, got {_kind(value)}")
        return value

    def obj(self, key: str) -> Obj:
        if self.raw.get(key) is None:
            raise MalformedUpdate(self._at(key), "required object is missing")
        return Obj(self.raw[key], self._at(key))

    def opt_obj(self, key: str) -> Obj | None:
        value = self.raw.get(key)
        return None if value is None else Obj(value, self._at(key))

    def objs(self, key: str) -> list[Obj]:
        """An optional array of objects (missing → empty)."""
        value = self.raw.get(key)
        if value is None:
            return []
        if not isinstance(value, Sequence) or isinstance(value, str | bytes):
            raise MalformedUpdate(self._at(key), f"expected an array, got {_kind(value)}")
        return [Obj(item, f"{self._at(key)}[{i}]") for i, item in enumerate(value)]


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedUpdate(path, f"expected an integer, got {_kind(value)}")
    return value


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise MalformedUpdate(path, f"expected a string, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, Sequence):
        return "array"
    return type(value).__name__
