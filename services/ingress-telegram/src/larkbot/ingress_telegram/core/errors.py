"""The exception tree of ingress-telegram, inside the one LarkBot tree (``larkbot.canonical.errors``).

Transient versus final is the type. Why an update cannot become canonical events, and what the Bot API
and the bus answered::

    ContractError (larkbot.canonical)
    ├── MalformedUpdate    the payload does not follow the Bot API schema (missing/mistyped field,
    │                      entity outside its text, boundary inside a surrogate pair)
    ├── UnsupportedUpdate  well-formed, but a kind this adapter does not consume (an update type outside
    │                      ``allowed_updates``, a poll, a dice, …)
    └── fake.html.HtmlParseError         the fake Bot API's ``can't parse entities``
    RetryableError (larkbot.canonical)
    ├── adapters.botapi.BotApiFault      Telegram answered 429 or 5xx: the call may succeed later
    ├── adapters.botapi.NotSent          the connection never opened: the request never left
    ├── adapters.botapi.OutcomeUnknown   the answer was lost: a send is never repeated after it
    ├── adapters.ledger.LedgerConflict   the sent-ledger's compare-and-set lost: read and decide again
    └── runtime.deadletter.DeadLetterFailed  a dead-letter record not written (the update waits)
    PermanentError (larkbot.canonical)
    ├── adapters.botapi.BotApiRefused    any other error answer: repeating the call cannot change it
    └── fake.server.ApiError             an error answer of the fake Bot API

``adapters.botapi.BotApiError`` is the common base of ``BotApiFault`` and ``BotApiRefused`` (every
``ok: false`` answer; ``adapters.botapi.bot_api_error`` picks the kind).

``MalformedUpdate`` and ``UnsupportedUpdate`` are dead-lettered with their message as the reason;
redelivery cannot fix either. Messages name fields and kinds, never user text.
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
