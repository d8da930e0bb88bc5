"""An aiohttp application served on a free loopback port for the length of a test, and a reader of the
pages it serves (their runs of text, the elements each stands in)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from html.parser import HTMLParser

from aiohttp import web


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """Yields the base URL (``http://127.0.0.1:<port>``)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@dataclass(frozen=True, slots=True)
class Shown:
    """A run of text of a page, with the elements it stands in (outermost first, with their attributes)."""

    text: str
    within: tuple[tuple[str, dict[str, str]], ...]

    def inside(self, tag: str, **attributes: str) -> bool:
        return any(t == tag and all(a.get(k) == v for k, v in attributes.items()) for t, a in self.within)


_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, dict[str, str]]] = []
        self.texts: list[Shown] = []
        self.attributes: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        self.attributes += [(tag, k, v) for k, v in values.items()]
        if tag not in _VOID:
            self.open.append((tag, values))

    def handle_endtag(self, tag: str) -> None:
        while self.open and self.open.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        self.texts.append(Shown(data, tuple(self.open)))


def read_page(html: str) -> tuple[list[Shown], list[tuple[str, str, str]]]:
    """The page's runs of text, and its attributes as (element, name, value)."""
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return reader.texts, reader.attributes


def unisolated(html: str, *needles: str) -> list[Shown]:
    """The runs of text holding one of ``needles`` that are not a bidi isolate of their own: in a
    ``<bdi>``, or, in an element of text only (title, option), between FSI and PDI."""
    texts, _ = read_page(html)
    found = []
    for shown in texts:
        if not any(n in shown.text for n in needles):
            continue
        tag = shown.within[-1][0] if shown.within else ""
        if tag in ("title", "option", "text"):
            if not (shown.text.startswith("\u2068") and shown.text.endswith("\u2069")):
                found.append(shown)
        elif not shown.inside("bdi"):
            found.append(shown)
    return found
