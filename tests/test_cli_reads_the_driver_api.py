"""The operator commands that read the driver's database (the inspector, ``larkbot audit``, ``larkbot
memory``) reach it only through the driver's public API, ``larkbot.driver.read`` (and the operator's
forget, ``larkbot.driver.forget``): never its adapters, tables or migrations (DESIGN §4)."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).parents[1] / "libs" / "cli" / "src" / "larkbot" / "cli"
OPERATOR_COMMANDS = sorted([*(CLI / "inspector").glob("*.py"), CLI / "audit.py", CLI / "memory.py"])
DRIVER_API = {"larkbot.driver.read", "larkbot.driver.forget"}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_operator_commands_import_the_driver_only_through_its_public_api() -> None:
    assert len(OPERATOR_COMMANDS) >= 6
    for path in OPERATOR_COMMANDS:
        imported = _imports(path)
        driver = {name for name in imported if name == "larkbot.driver" or name.startswith("larkbot.driver.")}
        outside = {name for name in driver if not any(name.startswith(api) for api in DRIVER_API)}
        assert not outside, f"{path.relative_to(CLI)} imports {sorted(outside)}"
        assert "larkbot.runtime.db.migrate" not in imported, f"{path.relative_to(CLI)} migrates"
