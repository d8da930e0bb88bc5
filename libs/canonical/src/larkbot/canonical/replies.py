"""The error reply of a request/reply service that has no error shape of its own (the ``pipeline.*``
services; actions, ``llm.generate`` and ``media.read_image`` answer with their own result models).

A reply is the JSON of one model and its ``Larkbot-Type`` header names that model, so a requester tells an
error from an answer by the header alone: ``larkbot.runtime.bus.Bus.request`` decodes a
:class:`ServiceError` as such and raises it as a typed exception (retryable or not, carrying ``code``)
instead of failing to decode the model it asked for.
"""

from __future__ import annotations

from typing import Literal

from ._base import Id, WireModel

__all__ = ["ServiceError"]


class ServiceError(WireModel):
    """Why a request was not answered. ``code`` is a short stable token a caller may act on; the pipeline's:

    - ``not_served``: no replica serves the chat's partition right now (a hand-over): retry shortly;
    - ``owner_unavailable``: the replica holding the partition's lease does not answer (it died and its
      lease has not expired yet): retry after the lease TTL;
    - ``unavailable``: another transient failure (the bus, the database);
    - ``bad_request``: the request does not fit the contract (never retried);
    - ``internal``: the handler failed unexpectedly.

    ``message`` is for humans and logs (never user content or secrets); ``retryable`` says whether the
    same request may succeed later."""

    kind: Literal["service_error"] = "service_error"
    code: Id
    message: str
    retryable: bool
