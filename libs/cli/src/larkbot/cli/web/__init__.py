"""What the stack's web pages share (the inspector and the browser playground): the security middleware,
HTML built with escaping by default, and the static files (docs/inspector.md "Security")."""

from .markup import Markup, attrs, el, join, page, text
from .security import CSP, STATIC_DIR, guard, secured_app, static_routes

__all__ = [
    "CSP",
    "STATIC_DIR",
    "Markup",
    "attrs",
    "el",
    "guard",
    "join",
    "page",
    "secured_app",
    "static_routes",
    "text",
]
