"""Public APIs pinned the httpx way: each ``__all__`` is checked against the module's namespace
(``vars()``), never against a copied list.

httpx's ``tests/test_exported_members.py`` asserts that ``httpx.__all__`` is exactly the public names of
``vars(httpx)``. The libraries of this workspace keep their API in plain modules too, so the rule is
applied to every public module of a library:

- a **package** (``__init__``) exports exactly its public namespace: every public name it binds, minus
  its own submodules that only the import system bound (reachable by their dotted path; a submodule
  imported by name, as ``from . import names``, is part of the namespace);
- a **module** exports every public name it *defines* — bound in ``vars()`` but not by an import
  statement — and beyond those only names it imports from its own library (a facade's re-exports:
  ``larkbot.runtime.retry`` re-exports :mod:`larkbot.runtime.backoff`).

Public by spelling but not API, so never required in ``__all__``: a module's logger and its type
variables. ``from __future__ import annotations`` binds ``annotations``, an import like any other.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import logging
import pkgutil
from types import ModuleType
from typing import ParamSpec, TypeVar, TypeVarTuple

_PLUMBING = (logging.Logger, TypeVar, ParamSpec, TypeVarTuple)


def public_modules(package: ModuleType) -> list[ModuleType]:
    """``package`` and every module below it whose dotted path has no ``_``-prefixed component."""
    found = [package]
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            found.append(importlib.import_module(info.name))
    return found


def _bound_by_import(module: ModuleType) -> dict[str, bool]:
    """The module-level names bound by an import statement → whether it imports from the module's own
    library (``larkbot.<library>``, or the top package outside ``larkbot``; or relative)."""
    parts = module.__name__.split(".")
    library = ".".join(parts[:2]) if parts[0] == "larkbot" else parts[0]
    bound: dict[str, bool] = {}

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    bound[name] = alias.name == library or alias.name.startswith(f"{library}.")
            elif isinstance(node, ast.ImportFrom):
                own = (
                    node.level > 0 or node.module == library or (node.module or "").startswith(f"{library}.")
                )
                for alias in node.names:
                    bound[alias.asname or alias.name] = own
            elif isinstance(node, ast.If | ast.Try | ast.With):
                # Module level still: ``if TYPE_CHECKING:``, ``try: … except ImportError:``.
                for body in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, body, []):
                        visit(child.body if isinstance(child, ast.ExceptHandler) else [child])

    visit(ast.parse(inspect.getsource(module)).body)
    return bound


def defined_names(module: ModuleType) -> set[str]:
    """The public names ``module`` defines itself: in ``vars()``, not bound by an import, not plumbing."""
    imported = _bound_by_import(module)
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name not in imported
        and not inspect.ismodule(value)
        and not isinstance(value, _PLUMBING)
    }


def export_problems(module: ModuleType) -> list[str]:
    """What is wrong with ``module.__all__`` by the rules above (empty when it is right)."""
    exported = getattr(module, "__all__", None)
    if exported is None:
        return [f"{module.__name__} has no __all__"]
    problems = [
        f"{module.__name__}.__all__ names {name}, which it lacks"
        for name in exported
        if name not in vars(module)
    ]
    if hasattr(module, "__path__"):
        imported = _bound_by_import(module)
        namespace = {
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and name != "annotations"
            and not (
                inspect.ismodule(value)
                and value.__name__.startswith(f"{module.__name__}.")
                and name not in imported
            )
        }
        problems += [
            f"{module.__name__} binds {name}, missing from __all__"
            for name in sorted(namespace - set(exported))
        ]
        problems += [
            f"{module.__name__}.__all__ names {name}, not public"
            for name in sorted(set(exported) - namespace)
        ]
        return problems
    imported = _bound_by_import(module)
    defined = defined_names(module)
    problems += [
        f"{module.__name__} defines {name}, missing from __all__" for name in sorted(defined - set(exported))
    ]
    problems += [
        f"{module.__name__}.__all__ names {name}, neither defined there nor imported from its library"
        for name in sorted(set(exported) - defined)
        if name in vars(module) and not imported.get(name, False)
    ]
    return problems
