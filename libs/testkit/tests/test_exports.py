"""The export checker catches what it forbids, on synthetic modules written to disk."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from larkbot.testkit.exports import defined_names, export_problems, public_modules

PACKAGE = "exportsample"

Write = Callable[[str, str], ModuleType]


def _forget() -> None:
    for name in [name for name in sys.modules if name == PACKAGE or name.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


@pytest.fixture
def write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Write]:
    """Writes one module of a fresh package ``exportsample`` and imports it anew (with its package)."""
    root = tmp_path / PACKAGE
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "_private.py").write_text("class Hidden: ...\n")
    (root / "other.py").write_text('__all__ = ["Shared"]\n\n\nclass Shared: ...\n')
    monkeypatch.syspath_prepend(str(tmp_path))

    def module(name: str, source: str) -> ModuleType:
        (root / f"{name}.py" if name != "__init__" else root / "__init__.py").write_text(source)
        _forget()
        importlib.invalidate_caches()
        return importlib.import_module(PACKAGE if name == "__init__" else f"{PACKAGE}.{name}")

    yield module
    _forget()


def test_a_defined_name_missing_from_all(write: Write) -> None:
    module = write("mod", '__all__ = ["a"]\n\n\ndef a(): ...\n\n\ndef b(): ...\n')
    assert export_problems(module) == [f"{PACKAGE}.mod defines b, missing from __all__"]


def test_a_name_all_lists_but_the_module_lacks(write: Write) -> None:
    module = write("mod", '__all__ = ["a", "gone"]\n\n\ndef a(): ...\n')
    assert export_problems(module) == [f"{PACKAGE}.mod.__all__ names gone, which it lacks"]


def test_no_all_at_all(write: Write) -> None:
    assert export_problems(write("mod", "X = 1\n")) == [f"{PACKAGE}.mod has no __all__"]


def test_re_exports_only_from_its_own_library(write: Write) -> None:
    own = write("facade", 'from .other import Shared\n\n__all__ = ["Shared"]\n')
    assert export_problems(own) == []
    foreign = write("leaky", 'from json import dumps\n\n__all__ = ["dumps"]\n')
    assert export_problems(foreign) == [
        f"{PACKAGE}.leaky.__all__ names dumps, neither defined there nor imported from its library"
    ]


def test_imports_loggers_and_type_variables_are_not_api(write: Write) -> None:
    source = (
        "from __future__ import annotations\n\nimport logging\nfrom typing import TYPE_CHECKING, TypeVar\n"
        "if TYPE_CHECKING:\n    from collections.abc import Sequence\n\n"
        '__all__ = ["LIMIT"]\n\nlog = logging.getLogger(__name__)\nT = TypeVar("T")\nLIMIT = 3\n'
    )
    module = write("quiet", source)
    assert defined_names(module) == {"LIMIT"}
    assert export_problems(module) == []


def test_a_package_exports_its_namespace_not_its_submodules(write: Write) -> None:
    write("other", '__all__ = ["Shared"]\n\n\nclass Shared: ...\n')
    package = write("__init__", 'from . import other\nfrom .other import Shared\n\n__all__ = ["Shared"]\n')
    # ``other`` is bound by name here, so it is part of the namespace; an implicitly bound submodule is not.
    assert export_problems(package) == [f"{PACKAGE} binds other, missing from __all__"]
    package = write("__init__", 'from .other import Shared\n\n__all__ = ["Shared"]\n')
    assert "other" in vars(package)  # bound by the import system when it loaded the submodule
    assert export_problems(package) == []


def test_private_modules_are_not_public(write: Write) -> None:
    package = write("__init__", "__all__: list[str] = []\n")
    assert [module.__name__ for module in public_modules(package)] == [PACKAGE, f"{PACKAGE}.other"]
