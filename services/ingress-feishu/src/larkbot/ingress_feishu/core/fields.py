"""Typed reads from untrusted JSON: every miss names its field path, never the value found there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import MalformedPayload


class Fields:
    """A JSON object with its path, so that an error reads ``event.message.chat_id: missing``."""

    __slots__ = ("data", "event_type", "path")

    def __init__(self, data: Any, path: str, event_type: str | None = None) -> None:
        if not isinstance(data, Mapping):
            raise MalformedPayload(f"{path}: expected an object", event_type=event_type)
        self.data: Mapping[str, Any] = data
        self.path = path
        self.event_type = event_type

    def _fail(self, key: str, what: str) -> MalformedPayload:
        return MalformedPayload(f"{self.path}.{key}: {what}", event_type=self.event_type)

    def obj(self, key: str) -> Fields:
        if key not in self.data or self.data[key] is None:
            raise self._fail(key, "missing")
        return Fields(self.data[key], f"{self.path}.{key}", self.event_type)

    def opt_obj(self, key: str) -> Fields | None:
        if self.data.get(key) is None:
            return None
        return self.obj(key)

    def req(self, key: str) -> str:
        value = self.data.get(key)
        if not isinstance(value, str) or not value:
            raise self._fail(key, "missing or not a non-empty string")
        return value

    def opt(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise self._fail(key, "not a string")
        return value

    def array(self, key: str) -> list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._fail(key, "not a list")
        return value

    def opt_int(self, key: str) -> int | None:
        """An integer that Feishu may send as a number or as a decimal string."""
        value = self.data.get(key)
        if value is None or value == "":
            return None
        if isinstance(value, bool):
            raise self._fail(key, "not an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
        raise self._fail(key, "not an integer")

    def millis(self, key: str) -> int:
        """A timestamp in epoch milliseconds (Feishu sends them as decimal strings)."""
        value = self.opt_int(key)
        if value is None:
            raise self._fail(key, "missing timestamp")
        return value

    def opt_bool(self, key: str) -> bool | None:
        value = self.data.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self._fail(key, "not a boolean")
