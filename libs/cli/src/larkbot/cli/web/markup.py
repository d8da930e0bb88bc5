"""HTML built as escaped text: every string that is not already :class:`Markup` is escaped on the way in,
attribute values included, so a member named ``<img src=x onerror=alert(1)>`` is shown as those characters.

Strings are also shown as they are stored, in their logical order, whatever they contain:

- **Isolated.** Each string child of an element is its own bidi isolate (``<bdi>``), so right-to-left
  text in a name or a reason cannot reorder what stands beside it. In the elements whose content is text
  only (:data:`TEXT_ONLY`: the page's title, an ``<option>``, SVG text) the plain-text isolates FSI…PDI
  do the same.
- **Controls shown.** Invisible control and format characters (general categories Cc, Cf, Zl, Zp: the
  bidi overrides, embeddings, isolates and marks, zero-width spaces, the BOM, C0/C1 controls) are replaced
  by a visible marker, ``⟨U+202E⟩``, drawn as ``<span class="ctl" dir="ltr">`` (as plain text in the
  text-only elements and in the attributes a person reads). So ``\\u202egnp.exe`` reads
  ``⟨U+202E⟩gnp.exe``, not ``exe.png``. Kept as they are: tab and newline; a zero-width joiner before a
  symbol (emoji sequences such as 👩‍💻); an emoji tag sequence (the flags of England, Scotland, Wales); the
  prepended concatenation marks, which are visible (Arabic number signs). ``static/playground.js`` applies
  the same rule in the browser.

Pages carry no inline script or style (the Content-Security-Policy forbids both): behaviour comes from
``/static/*.js``, looks from ``/static/*.css`` and classes; SVG plots use presentation attributes.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Final


class Markup(str):
    """Text that is already HTML (built here, escaped where it came from outside)."""

    __slots__ = ()


#: Elements whose content the parser keeps as text (or, in SVG, renders as text only): no child element.
TEXT_ONLY: Final = frozenset({"title", "option", "textarea", "text"})
#: Attributes a person reads (tooltips, labels); the others (``value``, ``href``, ``data-*``) are data and
#: keep the string exactly.
READ_ATTRIBUTES: Final = frozenset({"title", "alt", "aria-label", "placeholder"})
FSI, PDI = "\u2068", "\u2069"
#: The pages' icon, a static file (``security.secured_app`` also answers ``/favicon.ico`` with it).
FAVICON: Final = "/static/favicon.svg"

_SHOWN_AS_IS = frozenset("\t\n") | frozenset(
    "\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd"
)
# Cc/Cf/Zl/Zp code points lie in the BMP, the SMP and plane 14 (tags); planes 2-3 are kept for ideographs
# and 15-16 for private use. Scanning these three takes ~30 ms, once.
_CONTROLS = "".join(
    re.escape(chr(c))
    for plane in (range(0x20000), range(0xE0000, 0xF0000))
    for c in plane
    if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp") and chr(c) not in _SHOWN_AS_IS
)
_INVISIBLE = re.compile(f"\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f|[{_CONTROLS}]")


def _markers(value: str, marker: str) -> str:
    def one(match: re.Match[str]) -> str:
        found, after = match.group(), value[match.end() : match.end() + 1]
        if len(found) > 1:
            return found  # an emoji tag sequence
        if found == "\u200d" and after and unicodedata.category(after) == "So":
            return found  # joins two emoji
        return marker.format(f"U+{ord(found):04X}")

    return _INVISIBLE.sub(one, value)


def plain(value: object) -> str:
    """``value`` with its invisible controls as plain-text markers (still to be escaped); each marker is
    a left-to-right isolate (LRI…PDI), so it reads the same in right-to-left text."""
    return _markers(str(value), "\u2066⟨{}⟩\u2069")


def text(value: object) -> Markup:
    """Escaped, with invisible controls as ``<span class="ctl" dir="ltr">⟨U+XXXX⟩</span>``."""
    if isinstance(value, Markup):
        return value
    return Markup(_markers(escape(str(value), quote=True), '<span class="ctl" dir="ltr">⟨{}⟩</span>'))


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
            shown = plain(value) if name in READ_ATTRIBUTES else str(value)
            out.append(f' {name}="{escape(shown, quote=True)}"')
    return Markup("".join(out))


def _children(children: Iterable[object], text_only: bool = False) -> str:
    out: list[str] = []
    for child in children:
        if child is None or child == "":
            continue
        if isinstance(child, Markup):
            out.append(child)
        elif isinstance(child, str | int | float):
            if text_only:
                out.append(FSI + escape(plain(child), quote=True) + PDI)
            else:
                out.append(f"<bdi>{text(child)}</bdi>")
        else:
            out.append(_children(child, text_only))  # type: ignore[arg-type]
    return "".join(out)


def el(tag: str, attributes: Mapping[str, object] | None = None, *children: object) -> Markup:
    """``<tag attrs>children</tag>``; ``tag`` and attribute names are this module's callers' literals.
    Each string child is isolated and shows its controls (see the module's docstring)."""
    inner = _children(children, text_only=tag in TEXT_ONLY)
    return Markup(f"<{tag}{attrs(attributes or {})}>{inner}</{tag}>")


def join(*children: object) -> Markup:
    return Markup(_children(children))


def page(
    title: str | Sequence[str],
    body: object,
    *,
    scripts: Iterable[str] = (),
    styles: Iterable[str] = (),
) -> str:
    """A whole document: UTF-8, no remote resources; ``title`` one string or its parts (each isolated);
    ``scripts`` and ``styles`` are ``/static/`` names."""
    head = join(
        Markup('<meta charset="utf-8">'),
        Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
        el("title", None, title),
        Markup(f'<link rel="icon" href="{FAVICON}" type="image/svg+xml">'),
        [Markup(f'<link rel="stylesheet" href="/static/{escape(s)}">') for s in styles],
        [Markup(f'<script src="/static/{escape(s)}" defer></script>') for s in scripts],
    )
    return f'<!doctype html>\n<html lang="en"><head>{head}</head><body>{join(body)}</body></html>\n'


__all__ = ["FAVICON", "Markup", "attrs", "el", "join", "page", "plain", "text"]
