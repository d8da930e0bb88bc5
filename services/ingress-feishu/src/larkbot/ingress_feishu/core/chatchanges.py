"""``im.chat.updated_v1`` → what changed, one service action per kind of change.

Feishu reports the changed fields in ``after_change`` and their old values in ``before_change``, but
also sends fields that did not change (a rename repeats the avatar, say). Every field is compared and only
what differs is announced, in this order (each action's dedup-key suffix in brackets):

- ``name`` → ``chat_renamed`` (``""``: the envelope's event id alone);
- ``avatar`` → ``chat_photo_changed`` (``photo``);
- ``description`` → notice ``description_changed`` with the new description as its text (``description``);
- ``i18n_names`` → notice ``chat_names_changed`` (``names``): the changed locales and their new names,
  only when ``name`` itself did not change (a rename already says it);
- ``owner_id`` → notice ``owner_changed`` (``owner``) naming the new owner;
- ``moderator_list`` → notices ``moderators_added`` / ``moderators_removed`` naming them (same suffixes);
- every other field (permissions, approval, visibility, modes, labels…) → one notice ``settings_changed``
  (``settings``) with each changed field and its new value (an object setting by its own fields,
  ``restricted_mode_setting.status``). A setting counts only when both sides
  report it (Feishu reports a change as its old and new value): a field this adapter has never heard of,
  sent on one side only, says nothing about what changed.

Nothing changed → no action (the caller drops the event as ``no_canonical_form``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from larkbot.canonical.events import ChatNotice, ChatPhotoChanged, ChatRenamed, Sender, ServiceAction

from .fields import Fields

#: Fields with an action of their own; the rest are settings.
_OWN: Final = frozenset({"name", "avatar", "description", "i18n_names", "owner_id"})

Person = Callable[[str], Sender]


def _plain(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _open_id(value: object) -> str | None:
    if isinstance(value, Mapping) and isinstance(value.get("open_id"), str) and value["open_id"]:
        return str(value["open_id"])
    return None


def _users(items: object, person: Person) -> list[Sender]:
    ids = (
        [_open_id(item.get("user_id")) for item in items if isinstance(item, Mapping)]
        if isinstance(items, list)
        else []
    )
    return [person(i) for i in ids if i]


def _differences(
    new: Mapping[str, Any], old: Mapping[str, Any], prefix: str = ""
) -> Iterator[tuple[str, str]]:
    """Fields reported on both sides with different values; an object setting by its own fields
    (``restricted_mode_setting.status``)."""
    for key, value in new.items():
        if key not in old or value == old[key]:
            continue
        if isinstance(value, Mapping) and isinstance(old[key], Mapping):
            yield from _differences(value, old[key], f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", _plain(value)


def chat_update_actions(
    event: Fields, actor: Sender | None, person: Person
) -> list[tuple[str, ServiceAction]]:
    """(dedup-key suffix, action) for each change ``event`` reports."""
    after = event.opt_obj("after_change")
    before = event.opt_obj("before_change")
    new: Mapping[str, Any] = after.data if after is not None else {}
    old: Mapping[str, Any] = before.data if before is not None else {}
    changed = [key for key in new if new.get(key) != old.get(key)]
    actions: list[tuple[str, ServiceAction]] = []
    if "name" in changed and isinstance(new.get("name"), str):
        before_name = old.get("name")
        actions.append(
            (
                "",
                ChatRenamed(
                    actor=actor,
                    from_title=before_name if isinstance(before_name, str) else None,
                    to_title=new["name"],
                ),
            )
        )
    if "avatar" in changed:
        actions.append(("photo", ChatPhotoChanged(actor=actor)))
    if "description" in changed:
        actions.append(
            (
                "description",
                ChatNotice(type="description_changed", actor=actor, text=_plain(new["description"])),
            )
        )
    names_now, names_before = new.get("i18n_names"), old.get("i18n_names")
    if "i18n_names" in changed and "name" not in changed and isinstance(names_now, Mapping):
        was: Mapping[str, Any] = names_before if isinstance(names_before, Mapping) else {}
        locales = tuple((k, _plain(v)) for k, v in names_now.items() if k in was and v != was[k])
        if locales:
            actions.append(("names", ChatNotice(type="chat_names_changed", actor=actor, attributes=locales)))
    owner = _open_id(new.get("owner_id"))
    if owner is not None and owner != _open_id(old.get("owner_id")):
        actions.append(("owner", ChatNotice(type="owner_changed", actor=actor, members=(person(owner),))))
    moderators = event.opt_obj("moderator_list")
    if moderators is not None:
        for key, kind in (
            ("added_member_list", "moderators_added"),
            ("removed_member_list", "moderators_removed"),
        ):
            people = _users(moderators.data.get(key), person)
            if people:
                actions.append((kind, ChatNotice(type=kind, actor=actor, members=tuple(people))))
    settings = tuple(_differences({k: v for k, v in new.items() if k not in _OWN}, old))
    if settings:
        actions.append(("settings", ChatNotice(type="settings_changed", actor=actor, attributes=settings)))
    return actions
