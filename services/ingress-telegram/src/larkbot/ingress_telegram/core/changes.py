"""Reactions and membership changes (``message_reaction``, ``chat_member``, ``my_chat_member``)."""

from __future__ import annotations

from larkbot.canonical.events import (
    BotAdded,
    BotRemoved,
    CanonicalEvent,
    MemberLeft,
    MembersJoined,
    ReactionEvent,
    ServiceAction,
    ServiceEvent,
)

from .context import UpdateContext
from .errors import MalformedUpdate
from .payload import Obj
from .senders import chat_sender, user_sender

_PRESENT = frozenset({"creator", "administrator", "member"})


def _reaction_emoji(reaction: Obj) -> str:
    kind = reaction.str_("type")
    if kind == "emoji":
        return reaction.str_("emoji")
    if kind == "custom_emoji":
        return f"custom_emoji:{reaction.str_('custom_emoji_id')}"
    if kind == "paid":
        return "paid"
    raise MalformedUpdate(f"{reaction.path}.type", "unknown reaction type")


def reactions(ctx: UpdateContext, body: Obj) -> tuple[CanonicalEvent, ...]:
    message_id = ctx.message_id(body.int_("message_id"))
    date = body.int_("date")
    user, actor_chat = body.opt_obj("user"), body.opt_obj("actor_chat")
    if user is not None:
        actor = user_sender(user)
    elif actor_chat is not None:
        actor = chat_sender(actor_chat)
    else:
        raise MalformedUpdate(body.path, "neither user nor actor_chat")
    old = [_reaction_emoji(r) for r in body.objs("old_reaction")]
    new = [_reaction_emoji(r) for r in body.objs("new_reaction")]
    changes = [(e, True) for e in old if e not in new] + [(e, False) for e in new if e not in old]
    return tuple(
        ReactionEvent(
            **ctx.fields(
                f"{ctx.chat_id}:{message_id}:reaction:{actor.id}:{date}:{'-' if removed else '+'}{emoji}",
                float(date),
            ),
            message_id=message_id,
            actor=actor,
            emoji=emoji,
            removed=removed,
        )
        for emoji, removed in changes
    )


def _is_member(member: Obj) -> bool:
    status = member.str_("status")
    if status == "restricted":
        return member.bool_("is_member")
    return status in _PRESENT


def member_change(ctx: UpdateContext, body: Obj, *, is_bot: bool) -> ServiceEvent | None:
    date = body.int_("date")
    old, new = body.obj("old_chat_member"), body.obj("new_chat_member")
    was, now = _is_member(old), _is_member(new)
    if was == now:
        return None
    actor = user_sender(body.obj("from"))
    if is_bot:
        action: ServiceAction = BotAdded(actor=actor) if now else BotRemoved(actor=actor)
        key = f"{ctx.chat_id}:bot:{date}:{old.str_('status')}>{new.str_('status')}"
        return ServiceEvent(**ctx.fields(key, float(date)), action=action)
    member = user_sender(new.obj("user"))
    by = None if actor.id == member.id else actor
    action = MembersJoined(actor=by, members=(member,)) if now else MemberLeft(actor=by, members=(member,))
    verb = "join" if now else "leave"
    return ServiceEvent(**ctx.fields(f"{ctx.chat_id}:{verb}:{member.id}:{date}", float(date)), action=action)
