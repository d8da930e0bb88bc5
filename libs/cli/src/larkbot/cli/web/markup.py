"""HTML built as escaped text: every string that is not already :class:`Markup` is escaped on the way in,
attribute values included, so a member named ``<img src=x onerror=alert(1)>`` is shown as those characters.

Pages carry no inline script or style (the Content-Security-Policy forbids both): behaviour comes from
``/static/*.js``, looks from ``/static/*.css`` and classes; SVG plots use presentation attributes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape


class Markup(str):
    """Text that is already HTML (built here, escaped where it came from outside)."""

    __slots__ = ()


def text(value: object) -> Markup:
    return value if isinstance(value, Markup) else Markup(escape(str(value), quote=True))


def attrs(values: Mapping[str, object]) -> Markup:
    """`` name="value"`` pairs in the given order; ``None``/``False`` omit the attribute, ``True`` writes
    the bare name."""
    out = []
    for name, value in values.items():
        if value is None or value is False:
            continue
        if value is True:
            out.append(f" {name}")
        else:
            out.append(f' {name}="{escape(str(value), quote=True)}"')
    return Markup("".join(out))


def _children(children: Iterable[object]) -> str:
    out: list[str] = []
    for child in children:
        if child is None:
            continue
        if isinstance(child, str | int | float):
            out.append(text(child))
        else:
            out.append(_children(child))  # type: ignore[arg-type]
    return "".join(out)


def el(tag: str, attributes: Mapping[str, object] | None = None, *children: object) -> Markup:
    """``<tag attrs>children</tag>``; ``tag`` and attribute names are this module's callers' literals."""
    return Markup(f"<{tag}{attrs(attributes or {})}>{_children(children)}</{tag}>")


def join(*children: object) -> Markup:
    return Markup(_children(children))


def page(title: str, body: object, *, scripts: Iterable[str] = (), styles: Iterable[str] = ()) -> str:
    """A whole document: UTF-8, no remote resources; ``scripts`` and ``styles`` are ``/static/`` names."""
    head = join(
        Markup('<meta charset="utf-8">'),
        Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
        el("title", None, title),
        [Markup(f'<link rel="stylesheet" href="/static/{escape(s)}">') for s in styles],
        [Markup(f'<script src="/static/{escape(s)}" defer></script>') for s in scripts],
    )
    return f'<!doctype html>\n<html lang="en"><head>{head}</head><body>{join(body)}</body></html>\n'


__all__ = ["Markup", "attrs", "el", "join", "page", "text"]
