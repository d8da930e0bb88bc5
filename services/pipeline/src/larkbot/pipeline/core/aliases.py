"""The alias table of one rendering: which message id owns each alias (SPEC §3 "Aliases").

The alias function itself is :mod:`larkbot.canonical.aliases` (the driver derives the alias of a message it
has just sent from it too). When two ids of one chat hash to the same alias, the first id rendered in
context order keeps it and the later one renders its canonical id (:class:`AliasTable`).
"""

from __future__ import annotations

from larkbot.canonical.aliases import ALIAS_PATTERN, alias_for, looks_like_alias

__all__ = ["ALIAS_PATTERN", "AliasTable", "alias_for", "looks_like_alias"]


class AliasTable:
    """Which message id owns each alias, claimed in render order (first claim wins). A claim is never
    undone, so the owner of an alias answers what any id shows; ``alias_for`` keeps its own cache of the
    hashes (a second table from id to shown id was ~4 KB of a resident chat of 200 events)."""

    __slots__ = ("_by_alias", "chat_id", "enabled")

    def __init__(self, chat_id: str, enabled: bool) -> None:
        self.chat_id = chat_id
        self.enabled = enabled
        self._by_alias: dict[str, str] = {}

    def render(self, message_id: str) -> str:
        """The id to show for ``message_id``: its alias, or the canonical id after a collision."""
        if not self.enabled:
            return message_id
        alias = alias_for(self.chat_id, message_id)
        owner = self._by_alias.setdefault(alias, message_id)
        return alias if owner == message_id else message_id

    def resolve(self, alias: str) -> str | None:
        """The message id that renders as ``alias`` in this context, if any."""
        return self._by_alias.get(alias)
