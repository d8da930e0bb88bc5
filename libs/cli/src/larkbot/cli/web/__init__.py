"""What the stack's web pages share (the inspector and the browser playground): the security middleware,
HTML built with escaping by default (each string isolated, its invisible controls shown), and the static
files (docs/inspector.md "Security")."""

from .markup import FAVICON, Markup, attrs, el, join, page, plain, text
from .security import CSP, STATIC_DIR, guard, secured_app, static_routes

__all__ = [
    "CSP",
    "FAVICON",
    "STATIC_DIR",
    "Markup",
    "attrs",
    "el",
    "guard",
    "join",
    "page",
    "plain",
    "secured_app",
    "static_routes",
    "text",
]
