"""Where the web inspector and the browser playground listen (``inspector``)."""

from __future__ import annotations

import ipaddress

from pydantic import Field, model_validator

from ._base import Secret, _problems, _Section


class InspectorSettings(_Section):
    """The web inspector and the browser playground (docs/inspector.md): where they listen and the token a
    bind beyond loopback requires."""

    #: Loopback by default; any other address (``0.0.0.0`` in a container) needs ``access_token``.
    host: str = "127.0.0.1"
    port: int = Field(default=9188, ge=0, le=65535)
    #: Asked of every request when set (``Authorization: Bearer``, or once as ``?token=`` which sets a
    #: cookie); required for a bind beyond loopback.
    access_token: Secret | None = None

    @model_validator(mode="after")
    def _token_beyond_loopback(self) -> InspectorSettings:
        if not is_loopback(self.host) and self.access_token is None:
            raise _problems(
                "inspector",
                [(("access_token",), f"required when the inspector listens on {self.host!r}", None)],
            )
        if self.access_token is not None and len(self.access_token.get_secret_value()) < 16:
            raise _problems("inspector", [(("access_token",), "at least 16 characters", "<secret>")])
        return self


def is_loopback(host: str) -> bool:
    """``host`` names this machine's loopback only (a literal address or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
