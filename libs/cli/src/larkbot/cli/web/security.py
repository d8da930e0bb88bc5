"""The web surface's guards, one middleware for the inspector and the browser playground.

- **Headers** on every answer: a strict Content-Security-Policy (:data:`CSP`: scripts, styles, images and
  fetches from this origin only; no inline script or style, no frames, no plugins), ``nosniff``, no
  referrer, no framing, no caching of pages.
- **Token**: when one is configured every request must carry it, as ``Authorization: Bearer <token>`` or
  the ``larkbot_token`` cookie; a browser brings it once as ``?token=…``, which sets the cookie (HttpOnly,
  SameSite=Strict) and redirects to the same address without it, so it stays out of history and logs.
  Compared in constant time. A bind beyond loopback requires a token (``InspectorSettings``).
- **Host**: without a token the page answers only to loopback host names, so a web page elsewhere cannot
  reach it through DNS rebinding.
- **Origin**: a state-changing request (anything but GET/HEAD) from another origin is refused, so another
  site cannot post into the playground from the user's browser.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from pydantic import SecretStr

from larkbot.runtime.config import is_loopback

from .markup import FAVICON

STATIC_DIR = Path(__file__).parent / "static"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "media-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
COOKIE = "larkbot_token"
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_SAFE_METHODS = frozenset({"GET", "HEAD"})


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _given_token(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        return auth[len("Bearer ") :]
    return request.cookies.get(COOKIE)


def _same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == request.host


def guard(token: SecretStr | None, *, open_paths: frozenset[str] = frozenset()) -> Middleware:
    """``open_paths`` answer without the token (a liveness probe that reveals nothing)."""
    expected = token.get_secret_value().encode() if token is not None else None

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await _checked(request, handler)
        response.headers.update(_HEADERS)
        if response.content_type == "text/html":
            response.headers["Cache-Control"] = "no-store"
        return response

    async def _checked(request: web.Request, handler: Handler) -> web.StreamResponse:
        if expected is None and not is_loopback(_host_name(request.host)):
            return web.Response(status=421, text="this page answers on loopback only\n")
        if request.method not in _SAFE_METHODS and not _same_origin(request):
            return web.Response(status=403, text="cross-origin request refused\n")
        if expected is not None and request.path not in open_paths:
            offered = request.query.get("token")
            if offered is not None and request.method in _SAFE_METHODS:
                if not hmac.compare_digest(offered.encode(), expected):
                    return web.Response(status=401, text="wrong access token\n")
                target = request.rel_url.with_query({k: v for k, v in request.query.items() if k != "token"})
                found = web.Response(status=303, headers={"Location": str(target)})
                found.set_cookie(COOKIE, offered, httponly=True, samesite="Strict", path="/")
                return found
            given = _given_token(request)
            if given is None or not hmac.compare_digest(given.encode(), expected):
                return web.Response(
                    status=401,
                    text="an access token is required: open this address with ?token=<access token>\n",
                    headers={"WWW-Authenticate": "Bearer"},
                )
        try:
            return await handler(request)
        except web.HTTPException as exc:
            # Answered as a response so that the headers above apply to it too.
            return web.Response(status=exc.status, text=exc.text, headers=exc.headers)

    return middleware


def secured_app(token: SecretStr | None, *, open_paths: frozenset[str] = frozenset()) -> web.Application:
    """An application behind :func:`guard`, serving :data:`STATIC_DIR` at ``/static/`` and the icon."""
    app = web.Application(middlewares=[guard(token, open_paths=open_paths)])
    app.add_routes([*static_routes(), web.get("/favicon.ico", _favicon)])
    return app


async def _favicon(_request: web.Request) -> web.Response:
    # The pages name their icon (``<link rel="icon">``); a browser asks for /favicon.ico on an answer that
    # names none (a JSON endpoint opened in a tab), and logs an error when it is missing.
    raise web.HTTPFound(FAVICON)


def static_routes() -> list[web.AbstractRouteDef]:
    return [web.static("/static", STATIC_DIR, append_version=False)]


__all__ = ["CSP", "STATIC_DIR", "guard", "secured_app", "static_routes"]
