"""Bare ``@username`` mentions resolved to the user they name, from the chat's user table (SPEC §3 Identity).

A Telegram ``mention`` entity carries only the text (``@alice_l``); a ``text_mention`` carries the user.
The pipeline knows a username's user when that user's messages showed it: the IC keeps, for every
username seen on a message sender, the id of the user last seen with it (Telegram usernames are unique at
any one time and case-insensitive; a user seen with another username, or none, no longer holds the old
one). A message's mentions are resolved when the message enters the IC (and again for the new state of
an edit), against the table as it stands after the message's own sender was learnt — so the outcome
depends only on the message and the ones before it, and is stored in the node: a later message never
changes an earlier rendering. A username no message has shown stays unresolved (no ``uid``).
"""

from __future__ import annotations

from collections.abc import Mapping

from larkbot.canonical.content import (
    Blockquote,
    Bold,
    Content,
    Inline,
    Italic,
    Link,
    Mention,
    Spoiler,
    Strikethrough,
    Underline,
)
from larkbot.canonical.events import Sender

from .model import IC

_Parent = Bold | Italic | Underline | Strikethrough | Spoiler | Link | Blockquote


def learn(ic: IC, sender: Sender) -> None:
    """Record which username ``sender`` shows now (or that it shows none)."""
    key = sender.username.lower() if sender.username else None
    old = ic.username_of.get(sender.id)
    if old == key:
        return
    if old is not None and ic.usernames.get(old) == sender.id:
        del ic.usernames[old]
    if key is None:
        del ic.username_of[sender.id]
        return
    previous_holder = ic.usernames.get(key)
    if previous_holder is not None:
        del ic.username_of[previous_holder]
    ic.usernames[key] = sender.id
    ic.username_of[sender.id] = key


def resolve(content: Content, usernames: Mapping[str, str]) -> Content:
    """``content`` with every mention that carries no id but names a known username given that user's id
    (``content`` itself when nothing changes)."""
    if not usernames:
        return content
    nodes = _resolve(content.nodes, usernames)
    return content if nodes is content.nodes else content.model_copy(update={"nodes": nodes})


def _resolve(nodes: tuple[Inline, ...], usernames: Mapping[str, str]) -> tuple[Inline, ...]:
    out: list[Inline] | None = None
    for index, node in enumerate(nodes):
        new: Inline = node
        if isinstance(node, Mention):
            text = node.text.strip()
            if node.user_id is None and text.startswith("@"):
                user_id = usernames.get(text[1:].lower())
                if user_id is not None:
                    new = node.model_copy(update={"user_id": user_id})
        elif isinstance(node, _Parent) and node.children:
            children = _resolve(node.children, usernames)
            if children is not node.children:
                new = node.model_copy(update={"children": children})
        if new is not node and out is None:
            out = list(nodes[:index])
        if out is not None:
            out.append(new)
    return nodes if out is None else tuple(out)
