"""Reading the file: ``${ENV}`` interpolation, validation, one :class:`ConfigError` naming every bad key."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from larkbot.canonical.errors import ConfigError

from ._root import LarkbotConfig
from ._secrets import sections_of, withhold

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
DEFAULT_CONFIG_PATH = "config.yaml"


def interpolate(value: Any, env: Mapping[str, str], path: str = "") -> Any:
    """``value`` with every ``${NAME}`` replaced; :class:`ConfigError` names every variable missing."""
    missing: list[tuple[str, str]] = []
    out = _interpolate(value, env, path, missing)
    if missing:
        raise ConfigError(*missing[0], more=missing[1:])
    return out


def _interpolate(value: Any, env: Mapping[str, str], path: str, missing: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name, fallback = match.group(1), match.group(2)
            found = env.get(name)
            if found is None or (found == "" and fallback is not None):
                if fallback is None:
                    missing.append((path, f"environment variable {name} is not set"))
                    return ""
                return fallback
            return found

        return _ENV_REF.sub(replace, value)
    if isinstance(value, Mapping):
        return {k: _interpolate(v, env, f"{path}.{k}" if path else str(k), missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env, f"{path}.{i}", missing) for i, v in enumerate(value)]
    return value


def parse_config(
    raw: Any, env: Mapping[str, str] | None = None, *, service: str | None = None
) -> LarkbotConfig:
    """Validate ``raw``; with ``service``, as that service's view (only the sections it reads, the
    secrets it does not receive withheld, :mod:`._secrets`)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError("", "the configuration must be a mapping at the top level")
    if service is not None:
        raw = withhold(sections_of(raw, service, frozenset(LarkbotConfig.model_fields)), service)
    data = interpolate(raw, os.environ if env is None else env)
    try:
        return LarkbotConfig.model_validate(data)
    except ValidationError as exc:
        problems = [
            (".".join(str(p) for p in err["loc"]), err["msg"])
            for err in exc.errors(include_url=False, include_input=False)
        ]
        raise ConfigError(*problems[0], more=problems[1:]) from None


def load_config(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    service: str | None = None,
) -> LarkbotConfig:
    """Load and validate the configuration file (``LARKBOT_CONFIG`` when ``path`` is None); with
    ``service``, as that service's view: only its own secrets are read (:mod:`._secrets`).

    A missing ``LARKBOT_CONFIG`` with no ``config.yaml`` present yields the built-in defaults (a bus-only
    deployment with no platforms and no chats).
    """
    environ = os.environ if env is None else env
    explicit = path is not None or bool(environ.get("LARKBOT_CONFIG"))
    file = Path(path if path is not None else environ.get("LARKBOT_CONFIG") or DEFAULT_CONFIG_PATH)
    if not file.exists():
        if explicit:
            raise ConfigError("", "the file does not exist", file=str(file))
        return parse_config({}, environ, service=service)
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError("", f"not valid YAML{where}", file=str(file)) from None
    try:
        return parse_config(raw, environ, service=service)
    except ConfigError as exc:
        raise exc.in_file(str(file)) from None
