"""The visible text of interactive cards and system messages.

Cards arrive in two shapes: the receive event's flattened form (``{"title", "elements": [[row], …]}``,
each row a list of post-like elements) and the card JSON itself (``header`` + ``elements``, or schema 2.0
``body.elements``, or ``i18n_elements`` by locale). Both are walked in document order: a text object
(``plain_text`` / ``lark_md`` / ``markdown`` content, a ``text`` element, a link, an ``@`` name) is one
line, a flattened row one line; what a reader does not see without acting — button callback values,
confirmation dialogs, URLs, image alt text, configuration — is skipped. A locale-keyed part takes its
first locale, as posts do.

A system message is a template with ``{slot}`` placeholders filled from the content's other keys
(``{"template": "{from_user} invited {to_chatters} to the group.", "from_user": ["Alice"],
"to_chatters": ["Bob", "Carol"]}`` → ``Alice invited Bob, Carol to the group.``); a slot the content
does not fill reads ``…``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

#: Keys whose values a reader does not see (or which are not card content at all).
_HIDDEN: Final = frozenset(
    {"config", "card_link", "value", "behaviors", "confirm", "url", "multi_url", "href", "alt",
     "img_key", "image_key", "fallback", "extra", "template", "style", "icon", "i18n_header", "header",
     "title", "schema"}
)  # fmt: skip
_TEXT_OBJECTS: Final = frozenset({"plain_text", "lark_md", "markdown"})
_ROW_TAGS: Final = frozenset(
    {"text", "a", "at", "emotion", "button", "img", "media", "code_block", "hr", "md"}
)
_SLOT: Final = re.compile(r"\{([A-Za-z0-9_]+)\}")
#: A mention inside card markdown: ``<at id=all></at>``, ``<at id="ou_…">Name</at>``.
_AT: Final = re.compile(r"""<at\s+(?:id|user_id|open_id|email)=["']?([^"'\s>]+)["']?\s*>(.*?)</at>""")


def card_title(data: Mapping[str, Any]) -> str | None:
    title = data.get("title")
    if isinstance(title, str) and title:
        return title
    for key in ("header", "i18n_header"):
        header = _first_locale(data.get(key)) if key == "i18n_header" else data.get(key)
        if isinstance(header, Mapping):
            inner = header.get("title")
            if isinstance(inner, Mapping) and isinstance(inner.get("content"), str) and inner["content"]:
                return str(inner["content"])
    return None


def card_lines(data: Mapping[str, Any]) -> list[str]:
    """The card's visible lines (title excluded), in document order."""
    out: list[str] = []
    _walk(data, out)
    return [line for line in out if line.strip()]


def _first_locale(value: object) -> object:
    if isinstance(value, Mapping) and value and all(isinstance(v, Mapping | list) for v in value.values()):
        return next(iter(value.values()))
    return value


def _leaf(element: Mapping[str, Any]) -> str | None:
    """The text of an element that is itself text, else ``None``."""
    tag = element.get("tag")
    if tag in _TEXT_OBJECTS and isinstance(element.get("content"), str):
        return _AT.sub(_mention, str(element["content"]))
    if tag in ("text", "a") and isinstance(element.get("text"), str):
        return str(element["text"])
    if tag == "at":
        name = element.get("user_name") or element.get("user_id") or ""
        return f"@{name}" if name else ""
    return None


def _mention(match: re.Match[str]) -> str:
    who, shown = match.group(1), match.group(2).strip()
    return "@all" if who == "all" else f"@{shown or who}"


def _row(elements: list[Any]) -> str:
    parts = [_leaf(e) if isinstance(e, Mapping) else None for e in elements]
    return "".join(p for p in parts if p)


def _walk(value: object, out: list[str]) -> None:
    if isinstance(value, list):
        if value and all(isinstance(v, Mapping) and v.get("tag") in _ROW_TAGS for v in value):
            line = _row(value)
            if line:
                out.append(line)
            rest = [v for v in value if isinstance(v, Mapping) and _leaf(v) is None]
            for element in rest:
                _walk(element, out)
            return
        for item in value:
            _walk(item, out)
    elif isinstance(value, Mapping):
        text = _leaf(value)
        if text is not None:
            out.append(text)
            return
        for key, item in value.items():
            if key in _HIDDEN:
                continue
            _walk(_first_locale(item) if key.startswith("i18n_") else item, out)


def system_text(data: Mapping[str, Any]) -> str:
    template = data.get("template")
    if not isinstance(template, str):
        return ""

    def fill(match: re.Match[str]) -> str:
        value = data.get(match.group(1))
        if isinstance(value, list):
            names = [str(v) for v in value if isinstance(v, str | int) and str(v)]
            return ", ".join(names) if names else "…"
        if isinstance(value, Mapping):
            value = value.get("text")
        return str(value) if isinstance(value, str | int) and str(value) else "…"

    return _SLOT.sub(fill, template)
