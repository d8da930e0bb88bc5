"""What a Feishu OpenAPI error answer means for the caller: final for that object, or worth repeating.

Feishu answers a refused call with a JSON body ``{"code": N, "msg": …}``, HTTP 400 for errors of the
request (the object does not exist, the app may not see it, a parameter is invalid) and 5xx for its own
faults. On the inbound path the difference decides the acknowledgement: a final answer must end the event
(dropped or dead-lettered, acknowledged), because an event acknowledged 500 is re-pushed for hours and
would meet the same answer every time; only a transient answer may leave the event to Feishu's re-push.

Classes (:func:`classify`):

- ``not_found`` — the object is not there, no longer there, or not visible to this app: the message id is
  invalid (230001, also what message GET answers for an id Feishu does not know), recalled (230011) or
  deleted (230110), the bot is not in its chat (230002) or may not see it (230050), the reaction's
  message is gone (231003), the reaction id is invalid (231011), the file is not in the message (234003),
  the user is outside the app's contact scope (41050);
- ``forbidden`` — the app itself lacks an ability or a scope (230006 bot ability off, 230027 missing
  permission, 99991672 scope not granted): final until an operator changes the app;
- ``refused`` — any other 4xx answer (including 99992402, field validation failed): repeating the same
  request cannot succeed;
- ``transient`` — rate limits (99991400, 230020), HTTP 408/425/429 and 5xx, and answers without an HTTP
  error status: a later attempt may succeed.

Codes from the Open Platform's documentation of the calls LarkBot makes (message get/reply/recall,
reactions, message resources, contact user get) and its generic server-side code list.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class ApiFailure(StrEnum):
    NOT_FOUND = "not_found"
    FORBIDDEN = "forbidden"
    REFUSED = "refused"
    TRANSIENT = "transient"


NOT_FOUND_CODES: Final = frozenset({230001, 230002, 230011, 230050, 230110, 231003, 231011, 234003, 41050})
FORBIDDEN_CODES: Final = frozenset({230006, 230027, 99991672})
TRANSIENT_CODES: Final = frozenset({99991400, 230020})
_TRANSIENT_STATUS: Final = frozenset({408, 425, 429})


def classify(code: int, status: int) -> ApiFailure:
    """The class of an error answer with Feishu ``code`` and HTTP ``status``."""
    if code in TRANSIENT_CODES:
        return ApiFailure.TRANSIENT
    if code in NOT_FOUND_CODES:
        return ApiFailure.NOT_FOUND
    if code in FORBIDDEN_CODES:
        return ApiFailure.FORBIDDEN
    if 400 <= status < 500 and status not in _TRANSIENT_STATUS:
        return ApiFailure.REFUSED
    return ApiFailure.TRANSIENT
