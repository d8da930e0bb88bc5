"""The driver service with the shell tools offered in every normal step of the primary turn, whatever the
maintainer gate decides: cross-service tests of background tasks run it in place of ``larkbot run driver``
so that they exercise the tasks, not the gate."""

from __future__ import annotations

import sys
from typing import Any

from larkbot.driver.app import main
from larkbot.driver.core import records, tools

_SHELL = (tools.BASH, tools.KILL_TASK, tools.READ_TASK_OUTPUT)


def _with_shell(original: Any) -> Any:
    def exposed(mode: records.StepMode, **kwargs: Any) -> Any:
        specs = original(mode, **kwargs)
        if mode != "normal" or any(spec.name == tools.BASH for spec in specs):
            return specs
        return (*specs, *(tools.SPECS[name] for name in _SHELL))

    return exposed


if __name__ == "__main__":
    setattr(tools, "exposed", _with_shell(tools.exposed))  # noqa: B010 (patching the module)
    sys.exit(main())
