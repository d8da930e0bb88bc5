"""A faithful local Telegram Bot API: a real aiohttp server for tests, benchmarks and the playground."""

from __future__ import annotations

from .html import HtmlParseError, parse_html
from .server import FakeBotApi

__all__ = ["FakeBotApi", "HtmlParseError", "parse_html"]
