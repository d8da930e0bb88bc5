"""The public API of every public module of ``larkbot.runtime``, pinned the httpx way: each module's
``__all__`` is checked against its namespace (``vars()``), never against a copied list
(:mod:`larkbot.testkit.exports` states the rules)."""

from __future__ import annotations

from types import ModuleType

import pytest

import larkbot.runtime as runtime
from larkbot.testkit.exports import export_problems, public_modules

MODULES = public_modules(runtime)


def test_every_public_module_is_found() -> None:
    names = {module.__name__ for module in MODULES}
    assert {
        "larkbot.runtime",
        "larkbot.runtime.bus",
        "larkbot.runtime.config",
        "larkbot.runtime.retry",
    } <= names
    assert not any(part.startswith("_") for name in names for part in name.split("."))


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_all_is_what_the_module_defines(module: ModuleType) -> None:
    problems = export_problems(module)
    assert not problems, "\n".join(problems)


def test_the_package_exports_its_modules_not_names() -> None:
    assert runtime.__all__ == []
