"""XML escaping: the one gate between user text and the rendered context (SPEC §3, §9).

Every string that reaches the rendered XML goes through :func:`text` (element content) or :func:`attr`
(attribute values). After escaping, user text contains no ``<``, ``>`` or ``&`` that a parser would read as
markup, and attribute values contain no ``"``, so no user text can open an element, close one, or add an
attribute. Characters XML 1.0 cannot carry at all (C0 controls other than tab/newline/carriage return, lone
surrogates, U+FFFE/U+FFFF) become U+FFFD: escaping them as character references would still be ill-formed.
Attribute values also escape tab/newline/carriage return so that parsers do not normalise them to spaces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_NEEDS_TEXT = re.compile("[&<>\r]")
_NEEDS_ATTR = re.compile('[&<>"\n\r\t]')


def _legal(value: str) -> str:
    if _ILLEGAL.search(value) is None:
        return value
    return _ILLEGAL.sub("\ufffd", value)


def text(value: str) -> str:
    """Escape element content (newlines and tabs are kept as they are)."""
    value = _legal(value)
    if _NEEDS_TEXT.search(value) is None:
        return value
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")


def attr(value: str) -> str:
    """Escape an attribute value written between double quotes."""
    value = _legal(value)
    if _NEEDS_ATTR.search(value) is None:
        return value
    return (
        value.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\n", "&#10;")
        .replace("\r", "&#13;")
        .replace("\t", "&#9;")
    )


def attrs(pairs: Iterable[tuple[str, str]]) -> str:
    """`` k="v"`` for each pair, in the given order (names are ours, never user text)."""
    return "".join(f' {name}="{attr(value)}"' for name, value in pairs)


def element(tag: str, pairs: Iterable[tuple[str, str]], body: str | None) -> str:
    """``<tag …>body</tag>``, or self-closing when ``body`` is ``None`` or empty. ``body`` is already XML."""
    if body:
        return f"<{tag}{attrs(pairs)}>{body}</{tag}>"
    return f"<{tag}{attrs(pairs)}/>"


_NAME_START = re.compile(r"[A-Za-z_]")
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def attribute_name(raw: str) -> str:
    """A safe XML attribute name for a system-produced key (runtime events): invalid characters become
    ``_`` and a name that cannot start a name gets an ``x-`` prefix."""
    name = _NAME_BAD.sub("_", raw)
    if not _NAME_START.match(name) or name.lower().startswith("xml"):
        name = f"x-{name}"
    return name


def add_attributes(pairs: list[tuple[str, str]], extra: Iterable[tuple[str, str]]) -> None:
    """Append system-produced key/value pairs (runtime events, notices) to ``pairs`` under safe names; a
    name already taken gets an ``x-`` prefix until it is free."""
    seen = {name for name, _ in pairs}
    for key, value in extra:
        name = attribute_name(key)
        while name in seen:
            name = f"x-{name}"
        seen.add(name)
        pairs.append((name, value))
