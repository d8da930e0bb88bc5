"""The layers, pinned: canonical → runtime → services → cli/testkit.

- ``larkbot.canonical`` imports no other larkbot package; ``larkbot.runtime`` imports only canonical;
- a service imports only canonical, the runtime and itself: no service imports another;
- only ``larkbot.cli`` and ``larkbot.testkit`` import services;
- the product (canonical, runtime, services, cli) never imports ``larkbot.testkit`` — except
  ``larkbot bench``, whose benchmarks are the testkit's (:data:`TESTKIT_ENTRIES`);
- the CLI imports from the driver only its public read API, ``larkbot.driver.read`` and
  ``larkbot.driver.forget`` (DESIGN §4);
- a module with a path component named ``core`` inside a service imports no I/O (:data:`IO_MODULES`),
  neither itself nor through the larkbot modules it imports (``core → runtime.bus → nats`` is I/O too).

Everything is read from the source with :mod:`ast` — nothing here imports a package, so the test is fast
and sees lazy imports inside functions and ``TYPE_CHECKING`` blocks too. The modules are found from the
file tree, so a new module (or a new feature folder with its own ``core/``) is covered without editing
this file. Each rule is a function of one module's source, and each has a test showing it catches a
synthetic violation.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).parents[1]
LIBRARIES: Final = frozenset({"canonical", "runtime", "cli", "testkit"})
SERVICES: Final = frozenset(
    path.name for path in ROOT.glob("services/*/src/larkbot/*") if (path / "__init__.py").is_file()
)
PRODUCT_LIBRARIES: Final = frozenset({"canonical", "runtime", "cli"})
DRIVER_READ_API: Final = ("larkbot.driver.read", "larkbot.driver.forget")
IO_MODULES: Final = frozenset(
    {
        "asyncio",
        "nats",
        "sqlalchemy",
        "aiosqlite",
        "asyncpg",
        "httpx",
        "aiohttp",
        "aiogram",
        "lark_oapi",
        "subprocess",
        "socket",
    }
)

# (importing module, imported module) → why the product may reach the testkit there.
TESTKIT_ENTRIES: Final = {
    ("larkbot.cli.main", "larkbot.testkit.bench.report"): (
        "`larkbot bench` runs the testkit's benchmarks: imported lazily inside `_bench`, and a missing "
        "testkit (a deployment image leaves it out) is reported, not raised"
    ),
}


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. ``larkbot.driver.core.wake``
    is_package: bool
    source: str

    @property
    def package(self) -> str:
        """The larkbot package the module belongs to (``driver`` for ``larkbot.driver.core.wake``)."""
        return self.name.split(".")[1]


@dataclass(frozen=True)
class Import:
    target: str  # the imported module, absolute
    line: int


Rule = Callable[[Module, list[Import]], list[str]]


def discover(root: Path = ROOT) -> list[Module]:
    """Every module of every larkbot package of the workspace, from the file tree."""
    modules: list[Module] = []
    for package in sorted([*root.glob("libs/*/src/larkbot/*"), *root.glob("services/*/src/larkbot/*")]):
        if not (package / "__init__.py").is_file():
            continue
        base = package.parent.parent  # …/src
        for path in sorted(package.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            modules.append(Module(name, is_package, path.read_text(encoding="utf-8")))
    return modules


@functools.cache
def imports_of(module: Module, known: frozenset[str]) -> list[Import]:
    """What ``module`` imports, absolute; ``from pkg import sub`` counts as ``pkg.sub`` when ``sub`` is a
    module of ``known``. (Cached: the tree is parsed once, whatever the number of rules.)"""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(module.source)):
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append(Import(sub if sub in known else base, node.lineno))
    return found


def _larkbot_package(target: str) -> str | None:
    parts = target.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "larkbot" else None


def _reaching(module: Module, imports: list[Import], allowed: Callable[[str], bool]) -> list[str]:
    return [
        f"{module.name}:{imp.line} imports {imp.target}"
        for imp in imports
        if (package := _larkbot_package(imp.target)) is not None and not allowed(package)
    ]


def canonical_stands_alone(module: Module, imports: list[Import]) -> list[str]:
    if module.package != "canonical":
        return []
    return _reaching(module, imports, lambda package: package == "canonical")


def runtime_builds_on_canonical(module: Module, imports: list[Import]) -> list[str]:
    if module.package != "runtime":
        return []
    return _reaching(module, imports, lambda package: package in {"canonical", "runtime"})


def services_stand_alone(module: Module, imports: list[Import]) -> list[str]:
    if module.package not in SERVICES:
        return []
    return _reaching(module, imports, lambda package: package in {"canonical", "runtime", module.package})


def only_cli_and_testkit_import_services(module: Module, imports: list[Import]) -> list[str]:
    if module.package in {"cli", "testkit"}:
        return []
    return _reaching(module, imports, lambda package: package not in SERVICES or package == module.package)


def product_never_imports_testkit(module: Module, imports: list[Import]) -> list[str]:
    if module.package not in PRODUCT_LIBRARIES | SERVICES:
        return []
    return [
        f"{module.name}:{imp.line} imports {imp.target}"
        for imp in imports
        if _larkbot_package(imp.target) == "testkit" and (module.name, imp.target) not in TESTKIT_ENTRIES
    ]


def cli_reads_the_driver_through_its_api(module: Module, imports: list[Import]) -> list[str]:
    if module.package != "cli":
        return []
    return [
        f"{module.name}:{imp.line} imports {imp.target}"
        for imp in imports
        if _larkbot_package(imp.target) == "driver"
        and not any(imp.target == api or imp.target.startswith(f"{api}.") for api in DRIVER_READ_API)
    ]


def core_is_pure(module: Module, imports: list[Import]) -> list[str]:
    # Any path component named ``core`` below the service's package: ``driver/core/wake.py`` as well as
    # a feature's ``driver/memory/core/model.py``.
    if module.package not in SERVICES or "core" not in module.name.split(".")[2:]:
        return []
    return [
        f"{module.name}:{imp.line} imports {imp.target}"
        for imp in imports
        if imp.target.split(".")[0] in IO_MODULES
    ]


def _executed(target: str, known: frozenset[str]) -> list[str]:
    """The workspace modules an import of ``target`` runs: its packages' ``__init__`` and itself."""
    parts = target.split(".")
    return [name for i in range(2, len(parts) + 1) if (name := ".".join(parts[:i])) in known]


def core_reaches_no_io(modules: Iterable[Module], known: frozenset[str]) -> list[str]:
    """Every core module of a service whose imports lead, through workspace modules, to an I/O library;
    each reported with one path to it."""
    by_name = {module.name: module for module in modules}
    known = known | frozenset(by_name)
    problems = []
    for module in by_name.values():
        if module.package not in SERVICES or "core" not in module.name.split(".")[2:]:
            continue
        came_from: dict[str, str] = {}
        todo = [module.name]
        while todo:
            current = todo.pop()
            if current not in by_name:
                continue
            for imp in imports_of(by_name[current], known):
                if imp.target.split(".")[0] in IO_MODULES and current != module.name:
                    trail = [imp.target, current]
                    while trail[-1] != module.name:
                        trail.append(came_from[trail[-1]])
                    problems.append(f"{module.name} reaches {' ← '.join(trail)}")
                    todo = []
                    break
                for name in _executed(imp.target, known):
                    if name not in came_from and name != module.name:
                        came_from[name] = current
                        todo.append(name)
    return problems


RULES: Final[list[Rule]] = [
    canonical_stands_alone,
    runtime_builds_on_canonical,
    services_stand_alone,
    only_cli_and_testkit_import_services,
    product_never_imports_testkit,
    cli_reads_the_driver_through_its_api,
    core_is_pure,
]

MODULES: Final = discover()
KNOWN: Final = frozenset(module.name for module in MODULES)


def check(rule: Rule, modules: Iterable[Module], known: frozenset[str] = KNOWN) -> list[str]:
    return [problem for module in modules for problem in rule(module, imports_of(module, known))]


def test_the_tree_is_found() -> None:
    packages = {module.package for module in MODULES}
    assert packages == LIBRARIES | SERVICES
    assert {"ingress_feishu", "ingress_telegram", "pipeline", "driver", "media", "llm_gateway"} <= SERVICES
    assert any("core" in module.name.split(".") for module in MODULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_the_workspace_keeps_its_layers(rule: Rule) -> None:
    problems = check(rule, MODULES)
    assert not problems, "\n".join(problems)


def test_core_modules_reach_no_io_through_their_imports() -> None:
    problems = core_reaches_no_io(MODULES, KNOWN)
    assert not problems, "\n".join(problems)


def test_the_transitive_check_catches_io_behind_an_import() -> None:
    core = Module("larkbot.driver.memory.core.model", False, "from ..store import Store\n")
    store = Module("larkbot.driver.memory.store", False, "def f():\n    import sqlalchemy\n")
    package = Module("larkbot.driver.memory", True, "")
    pure = Module("larkbot.driver.memory.core.facts", False, "from larkbot.canonical import names\n")
    assert core_reaches_no_io([core, store, package, pure], KNOWN) == [
        "larkbot.driver.memory.core.model reaches sqlalchemy ← larkbot.driver.memory.store"
        " ← larkbot.driver.memory.core.model"
    ]


def test_every_testkit_entry_of_the_product_is_still_used() -> None:
    # An entry nobody needs any more is a door left open: remove it with the import.
    used = {
        (module.name, imp.target)
        for module in MODULES
        for imp in imports_of(module, KNOWN)
        if (module.name, imp.target) in TESTKIT_ENTRIES
    }
    assert used == set(TESTKIT_ENTRIES)


# Each rule catches what it forbids: (rule, module name, source that breaks it, source that keeps it).
SYNTHETIC: Final = [
    (
        canonical_stands_alone,
        "larkbot.canonical.extra",
        "from larkbot.runtime import bus\n",
        "from . import names\n",
    ),
    (
        runtime_builds_on_canonical,
        "larkbot.runtime.extra",
        "def f():\n    from larkbot.driver.core import wake\n",
        "from larkbot.canonical import names\nfrom .bus import Bus\n",
    ),
    (
        services_stand_alone,
        "larkbot.pipeline.adapters.extra",
        "import larkbot.media.core.transforms\n",
        "from ..core import state\nfrom larkbot.runtime.bus import Bus\n",
    ),
    (
        only_cli_and_testkit_import_services,
        "larkbot.runtime.extra",
        "from larkbot import driver\n",
        "from larkbot.canonical import errors\n",
    ),
    (
        product_never_imports_testkit,
        "larkbot.media.adapters.extra",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from larkbot.testkit.media import fakes\n",
        "from larkbot.runtime import retry\n",
    ),
    (
        cli_reads_the_driver_through_its_api,
        "larkbot.cli.extra",
        "from larkbot.driver.adapters.tables import wakes\n",
        "from larkbot.driver.read import open_reads\nfrom larkbot.driver.forget import forget_person\n",
    ),
    (
        core_is_pure,
        "larkbot.driver.memory.core.model",
        "from asyncio import sleep\n",
        "import json\nfrom larkbot.canonical.llm import Usage\n",
    ),
]


def test_every_rule_has_a_synthetic_case() -> None:
    assert [case[0] for case in SYNTHETIC] == RULES


@pytest.mark.parametrize(
    ("rule", "name", "bad", "good"), SYNTHETIC, ids=[case[0].__name__ for case in SYNTHETIC]
)
def test_the_rule_catches_a_violation(rule: Rule, name: str, bad: str, good: str) -> None:
    known = KNOWN | {name}
    assert len(check(rule, [Module(name, False, bad)], known)) == 1
    assert check(rule, [Module(name, False, good)], known) == []


def test_the_bench_entry_is_the_only_way_the_cli_reaches_the_testkit() -> None:
    main = Module("larkbot.cli.main", False, "from larkbot.testkit.bench.report import main\n")
    other = Module("larkbot.cli.up", False, "from larkbot.testkit.bench.report import main\n")
    assert check(product_never_imports_testkit, [main, other]) == [
        "larkbot.cli.up:1 imports larkbot.testkit.bench.report"
    ]


def test_a_relative_import_resolves_from_its_package() -> None:
    init = Module("larkbot.driver.memory", True, "from .core import model\nfrom .. import metrics\n")
    leaf = Module(
        "larkbot.driver.memory.store", False, "from .core.model import Fact\nfrom ..read import x\n"
    )
    known = frozenset({"larkbot.driver.memory.core.model", "larkbot.driver.metrics"})
    assert [imp.target for imp in imports_of(init, known)] == [
        "larkbot.driver.memory.core.model",
        "larkbot.driver.metrics",
    ]
    assert [imp.target for imp in imports_of(leaf, known)] == [
        "larkbot.driver.memory.core.model",
        "larkbot.driver.read",
    ]
