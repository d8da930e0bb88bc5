"""Telegram's ``parse_mode=HTML`` as the fake Bot API applies it: text + entities (UTF-16 offsets), or
the same ``can't parse entities`` refusal Telegram answers for unknown or unbalanced tags."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any, Final

from larkbot.canonical.errors import ContractError

_SIMPLE: Final = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
}


class HtmlParseError(ContractError):
    """Telegram: ``Bad Request: can't parse entities: …``."""


def _u16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self._units = 0
        self.stack: list[tuple[str, int, dict[str, Any]]] = []
        self.entities: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        entity: dict[str, Any]
        if tag in _SIMPLE:
            entity = {"type": _SIMPLE[tag]}
            if tag == "blockquote" and "expandable" in values:
                entity = {"type": "expandable_blockquote"}
            if tag == "code" and self.stack and self.stack[-1][0] == "pre":
                language = values.get("class", "")
                if language.startswith("language-"):
                    self.stack[-1][2]["language"] = language[len("language-") :]
                entity = {"type": "_pre_code"}
        elif tag == "span" and values.get("class") == "tg-spoiler":
            entity = {"type": "spoiler"}
        elif tag == "a":
            href = values.get("href")
            if not href:
                raise HtmlParseError(f"can't parse entities: <a> without href at byte offset {self._units}")
            if href.startswith("tg://user?id="):
                entity = {"type": "text_mention", "user": {"id": int(href.split("=", 1)[1])}}
            else:
                entity = {"type": "text_link", "url": href}
        elif tag == "tg-emoji":
            entity = {"type": "custom_emoji", "custom_emoji_id": values.get("emoji-id", "")}
        else:
            raise HtmlParseError(
                f'can\'t parse entities: unsupported start tag "{tag}" at byte offset {self._units}'
            )
        self.stack.append((tag, self._units, entity))

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1][0] != tag:
            raise HtmlParseError(
                f"can't parse entities: can't find end tag corresponding to start tag \"{tag}\""
            )
        _, start, entity = self.stack.pop()
        if entity["type"] != "_pre_code" and self._units > start:
            self.entities.append({"offset": start, "length": self._units - start, **entity})

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        self._units += _u16(data)


def parse_html(html: str) -> tuple[str, list[dict[str, Any]]]:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    if parser.stack:
        raise HtmlParseError(f'can\'t parse entities: unclosed start tag "{parser.stack[-1][0]}"')
    entities = sorted(parser.entities, key=lambda e: (e["offset"], -e["length"]))
    return "".join(parser.text), entities
