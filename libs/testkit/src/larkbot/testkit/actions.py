"""Action requests for tests that must cover every kind: :func:`acting_actions`, one action of each kind
that acts on the platform (everything but ``larkbot.canonical.actions.READ_ONLY_ACTIONS``) — what
``fetch.<platform>`` must refuse — and :func:`refused_as_not_read_only`, the check of those answers."""

from __future__ import annotations

from typing import get_args

from larkbot.canonical.actions import (
    NOT_READ_ONLY,
    READ_ONLY_ACTIONS,
    ActionRequest,
    ActionResult,
    BanMemberAction,
    DeleteMessageAction,
    ModerateAction,
    ModeratedMessage,
    ReactAction,
    SendImageAction,
    SendMessageAction,
    TypingAction,
)
from larkbot.canonical.names import Platform

__all__ = ["acting_actions", "acting_kinds", "refused_as_not_read_only"]


def acting_kinds() -> frozenset[str]:
    """Every action kind that is not read-only, as the wire contract declares them."""
    union, _discriminator = get_args(ActionRequest)
    return frozenset(
        model.model_fields["kind"].default for model in get_args(union) if model not in READ_ONLY_ACTIONS
    )


def acting_actions(
    platform: Platform, chat_id: str, *, message_id: str, user_id: str, blob_key: str
) -> list[ActionRequest]:
    """One action of every kind in :func:`acting_kinds`, each keyed ``<kind>-1``, aimed at ``message_id``
    and ``user_id`` in ``chat_id`` (``blob_key``: the picture of ``send_image``)."""

    p, c = platform, chat_id
    actions: list[ActionRequest] = [
        SendMessageAction(platform=p, chat_id=c, idempotency_key="send_message-1", text="hello"),
        ReactAction(platform=p, chat_id=c, idempotency_key="react-1", message_id=message_id, emoji="👍"),
        TypingAction(platform=p, chat_id=c, idempotency_key="typing-1"),
        SendImageAction(
            platform=p, chat_id=c, idempotency_key="send_image-1", blob_key=blob_key, mime="image/png"
        ),
        DeleteMessageAction(
            platform=p, chat_id=c, idempotency_key="delete_message-1", message_ids=(message_id,)
        ),
        BanMemberAction(platform=p, chat_id=c, idempotency_key="ban_member-1", user_id=user_id),
        ModerateAction(
            platform=p,
            chat_id=c,
            idempotency_key="moderate-1",
            user_id=user_id,
            messages=(ModeratedMessage(message_id=message_id, timestamp_sec=1_767_225_600),),
        ),
    ]
    missing = acting_kinds() - {action.kind for action in actions}
    if missing:
        raise AssertionError(f"no sample action of kind {sorted(missing)}: add one here")
    return actions


def refused_as_not_read_only(actions: list[ActionRequest], results: list[ActionResult]) -> list[str]:
    """What is wrong with ``results`` as the answers of ``fetch.<platform>`` to ``actions``, in order (empty:
    each one ``failed`` with code ``not_read_only``, not retryable, under its own key, naming its kind)."""
    if len(actions) != len(results):
        return [f"{len(results)} answers to {len(actions)} actions"]
    problems = []
    for action, result in zip(actions, results, strict=True):
        error = result.error
        if (
            result.idempotency_key != action.idempotency_key
            or result.ok
            or result.outcome != "failed"
            or error is None
            or (error.code, error.retryable) != (NOT_READ_ONLY, False)
            or f"{action.kind} is not a read-only action" not in error.message
        ):
            problems.append(f"{action.kind}: {result!r}")
    return problems
