"""Why an update cannot become canonical events.

::

    ContractError (larkbot.canonical)
    ├── MalformedUpdate    the payload does not follow the Bot API schema (missing/mistyped field,
    │                      entity outside its text, boundary inside a surrogate pair)
    └── UnsupportedUpdate  well-formed, but a kind this adapter does not consume (an update type outside
                           ``allowed_updates``, a poll, a dice, …)

Both are dead-lettered with their message as the reason; redelivery cannot fix either. Messages name
fields and kinds, never user text.
"""

from __future__ import annotations

from larkbot.canonical.errors import ContractError


class MalformedUpdate(ContractError):
    """The update violates the Bot API schema; ``path`` is the dotted location of the bad field."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"malformed update: {path}: {problem}")
        self.path = path
        self.problem = problem


class UnsupportedUpdate(ContractError):
    """A well-formed update of a kind the adapter does not turn into events."""

    def __init__(self, what: str) -> None:
        super().__init__(f"unsupported update: {what}")
        self.what = what
