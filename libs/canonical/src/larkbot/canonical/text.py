"""Text hygiene at the edge, shared by the ingress adapters. Pure.

JSON may carry ``\\ud800``-style escapes that decode to lone UTF-16 surrogates: a Python ``str`` holds them,
but no UTF-8 encoder accepts them, so an event carrying one could be adapted and then never published.
Platforms send them only by mistake; they are replaced by U+FFFD before adaptation (the rest of the text is
kept, as a client rendering it would do).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["replace_lone_surrogates"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(value: Any) -> Any:
    """``value`` (decoded JSON) with every lone surrogate in its strings and keys replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value) if _LONE_SURROGATE.search(value) else value
    if isinstance(value, Mapping):
        return {replace_lone_surrogates(k): replace_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_lone_surrogates(v) for v in value]
    return value
