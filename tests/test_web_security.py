"""The guard in front of the inspector and the browser playground (docs/inspector.md "Security"): headers
on every answer, the token beyond loopback, host and origin checks, the icon; and HTML escaped by default,
each string its own bidi isolate with its invisible controls shown."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web
from pydantic import SecretStr
from tests.harness.web import read_page, unisolated
from tests.harness.web import serving as serve_app

from larkbot.canonical.errors import ConfigError
from larkbot.cli.web import CSP, FAVICON, el, join, page, plain, secured_app, text
from larkbot.runtime.config import is_loopback, parse_config

TOKEN = "s3cret-token-for-tests-only"
HOSTILE = "<img src=x onerror=alert(1)>\"'&<script>alert(2)</script>"
#: Shown as they act, these reorder or hide text: an override (``gnp.exe`` reads ``exe.png``), an
#: embedding, an isolate, a mark, a zero-width space, a BOM, a C1 control, a line separator, a tag.
CONTROLS = "\u202e\u202b\u2067\u200f\u200b\ufeff\x85\u2028\U000e0041"


@asynccontextmanager
async def serving(token: SecretStr | None) -> AsyncIterator[str]:
    app = secured_app(token, open_paths=frozenset({"/healthz"}))

    async def home(_request: web.Request) -> web.Response:
        return web.Response(text=page("home", el("p", None, HOSTILE)), content_type="text/html")

    async def post(_request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app.add_routes([web.get("/", home), web.post("/say", post), web.get("/healthz", healthz)])
    async with serve_app(app) as base:
        yield base


async def test_every_answer_carries_the_strict_headers() -> None:
    async with serving(None) as base, aiohttp.ClientSession() as session:
        for path in ("/", "/static/inspector.css", "/nowhere"):
            async with session.get(base + path) as resp:
                assert resp.headers["Content-Security-Policy"] == CSP, path
                assert resp.headers["X-Content-Type-Options"] == "nosniff"
                assert resp.headers["X-Frame-Options"] == "DENY"
                assert resp.headers["Referrer-Policy"] == "no-referrer"
        async with session.get(base + "/") as resp:
            body = await resp.text()
            assert resp.headers["Cache-Control"] == "no-store"
    assert "'unsafe-inline'" not in CSP
    assert "'unsafe-eval'" not in CSP
    assert "script-src 'self'" in CSP
    assert "default-src 'none'" in CSP
    assert "<img" not in body
    assert "<script>alert" not in body
    assert "&lt;img src=x onerror=alert(1)&gt;&quot;&#x27;&amp;&lt;script&gt;" in body


async def test_without_a_token_only_loopback_host_names_are_answered() -> None:
    async with serving(None) as base, aiohttp.ClientSession() as session:
        async with session.get(base + "/", headers={"Host": "localhost:1"}) as resp:
            assert resp.status == 200
        # DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends its own host name.
        async with session.get(base + "/", headers={"Host": "evil.example:80"}) as resp:
            assert resp.status == 421


async def test_a_post_from_another_origin_is_refused() -> None:
    async with serving(None) as base, aiohttp.ClientSession() as session:
        async with session.post(base + "/say", json={}, headers={"Origin": "http://evil.example"}) as resp:
            assert resp.status == 403
        async with session.post(base + "/say", json={}, headers={"Origin": "null"}) as resp:
            assert resp.status == 403
        async with session.post(base + "/say", json={}, headers={"Origin": base}) as resp:
            assert resp.status == 200
        async with session.post(base + "/say", json={}) as resp:  # not a browser: no Origin
            assert resp.status == 200


async def test_a_configured_token_is_required_and_set_as_a_cookie_once() -> None:
    async with serving(SecretStr(TOKEN)) as base:
        async with aiohttp.ClientSession() as session:
            async with session.get(base + "/") as resp:
                assert resp.status == 401
                assert TOKEN not in await resp.text()
            async with session.get(base + "/", headers={"Authorization": "Bearer wrong"}) as resp:
                assert resp.status == 401
            async with session.get(base + "/", headers={"Authorization": f"Bearer {TOKEN}"}) as resp:
                assert resp.status == 200
            async with session.get(base + "/?token=wrong", allow_redirects=False) as resp:
                assert resp.status == 401
            async with session.get(base + "/healthz") as resp:
                assert resp.status == 200  # the liveness probe needs no token
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
            async with browser.get(base + f"/?token={TOKEN}&x=1", allow_redirects=False) as resp:
                assert resp.status == 303
                assert resp.headers["Location"] == "/?x=1"  # the token leaves the address bar
                cookie = resp.cookies["larkbot_token"]
                assert cookie["httponly"]
                assert cookie["samesite"] == "Strict"
            async with browser.get(base + "/") as resp:
                assert resp.status == 200


def test_a_bind_beyond_loopback_needs_a_long_enough_token() -> None:
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "[::1]", "localhost")] == [True] * 4
    assert [is_loopback(h) for h in ("0.0.0.0", "10.1.2.3", "example.org")] == [False] * 3
    with pytest.raises(ConfigError) as missing:
        parse_config({"inspector": {"host": "0.0.0.0"}}, {})
    assert "inspector.access_token" in missing.value.report()
    with pytest.raises(ConfigError) as short:
        parse_config({"inspector": {"host": "0.0.0.0", "access_token": "short-one"}}, {})
    assert "short-one" not in short.value.report()
    config = parse_config({"inspector": {"host": "0.0.0.0", "access_token": "${T}"}}, {"T": TOKEN})
    assert config.inspector.port == 9188
    assert TOKEN in config.secret_values()  # masked in logs like every other secret


def test_markup_escapes_text_and_attributes() -> None:
    assert text(HOSTILE).count("<") == 0
    built = el("a", {"href": '" onmouseover="x', "title": HOSTILE, "hidden": True, "skip": None}, HOSTILE)
    assert built.startswith('<a href="&quot; onmouseover=&quot;x" title="&lt;img')
    assert " hidden>" in built
    assert "skip" not in built
    assert "<script>" not in built


def test_each_string_is_isolated_and_its_invisible_controls_are_shown() -> None:
    name = "Eve \u202egnp.exe"
    cell = el("td", None, name, " said ", "שלום 123")
    assert cell == (
        '<td><bdi>Eve <span class="ctl" dir="ltr">⟨U+202E⟩</span>gnp.exe</bdi><bdi> said </bdi>'
        "<bdi>שלום 123</bdi></td>"
    )
    assert join(el("b", None, HOSTILE)) == f"<b><bdi>{text(HOSTILE)}</bdi></b>"
    every = text(CONTROLS)
    for char in CONTROLS:
        assert char not in every
        assert f'<span class="ctl" dir="ltr">⟨U+{ord(char):04X}⟩</span>' in every
    # Text-only elements hold no element: plain-text markers, and FSI…PDI as the isolate. Data attributes
    # keep the string exactly (the value posted back is the member's name); the ones a person reads show it.
    option = el("option", {"value": name, "title": name, "data-from": name}, name)
    assert option == (
        '<option value="Eve \u202egnp.exe" title="Eve \u2066⟨U+202E⟩\u2069gnp.exe" '
        'data-from="Eve \u202egnp.exe">'
        "\u2068Eve \u2066⟨U+202E⟩\u2069gnp.exe\u2069</option>"
    )
    assert plain(CONTROLS).count("⟨U+") == len(CONTROLS)
    document = page(["chat ", name], el("p", None, name))
    assert "<title>\u2068chat \u2069\u2068Eve \u2066⟨U+202E⟩\u2069gnp.exe\u2069</title>" in document
    assert unisolated(document, "gnp.exe") == []
    texts, _ = read_page(document)
    assert all("\u202e" not in shown.text for shown in texts)


def test_what_is_visible_and_what_joins_emoji_is_kept() -> None:
    england = "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
    kept = f"tab\tnew\nline 👩\u200d💻 ❤\ufe0f {england} \u0600١"
    assert text(kept) == kept
    # A zero-width joiner between letters hides in a word; a tag character outside a flag smuggles text.
    assert text("pay\u200dpal") == 'pay<span class="ctl" dir="ltr">⟨U+200D⟩</span>pal'
    assert text("a\U000e0041") == 'a<span class="ctl" dir="ltr">⟨U+E0041⟩</span>'
    assert text("\u200d") == '<span class="ctl" dir="ltr">⟨U+200D⟩</span>'


async def test_the_icon_is_served_under_the_strict_csp() -> None:
    async with serving(None) as base, aiohttp.ClientSession() as session:
        async with session.get(base + "/") as resp:
            home = await resp.text()
        async with session.get(base + FAVICON) as resp:
            assert resp.status == 200
            assert resp.content_type == "image/svg+xml"
            assert resp.headers["Content-Security-Policy"] == CSP
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
            icon = await resp.text()
        # What a browser asks for when a page names no icon (a JSON answer opened in a tab).
        async with session.get(base + "/favicon.ico", allow_redirects=False) as resp:
            assert resp.status == 302
            assert resp.headers["Location"] == FAVICON
            assert resp.headers["Content-Security-Policy"] == CSP
    assert f'<link rel="icon" href="{FAVICON}" type="image/svg+xml">' in home
    assert icon.startswith("<svg ")
    assert "<script" not in icon
    assert "href" not in icon  # nothing loaded from elsewhere
