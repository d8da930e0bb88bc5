"""``make profile``: where the time of the hot paths goes, sampled with py-spy while the bench runs them.

- ``turn``: the turn bench (:mod:`.turn`) with py-spy attached to each service process (ingress-telegram,
  pipeline, driver, llm-gateway) from the moment they are ready to their exit: the turn path and the work
  around it (the self-sent event, the closing model call), not their start-up;
- ``pipeline``: the pipeline bench's service part (:mod:`.pipeline`, the pipeline in-process) under py-spy.

Each profile is kept as folded stacks (``<dir>/<name>.txt``, what flame-graph tools read) and summarised
as the functions with most samples of their own (*self*) and under them (*total*), as a share of the
process's samples. Idle time is left out (py-spy's default: only threads on the CPU are sampled), so a
share is of the CPU the process spent; ``Runner.run``'s own samples are the event loop's native code
(uvloop: polling, socket I/O, scheduling callbacks), which py-spy cannot see into. The figures of a
profiled run are slower than the bench's (sampling costs); the shares are what to read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from larkbot.runtime.natsserver import EmbeddedNats

__all__ = ["ENV_PROFILE", "RATE", "Entry", "main", "summarise", "top"]

#: Set to a directory, it makes the turn bench attach py-spy to each service it starts (``turn.py``).
ENV_PROFILE = "LARKBOT_BENCH_PROFILE"
#: Samples per second: enough for shares of a 1-minute run, little enough not to skew them.
RATE = 250


@dataclass(frozen=True, slots=True)
class Entry:
    function: str
    self_share: float
    total_share: float


def top(folded: Iterable[str], limit: int = 15) -> tuple[int, list[Entry]]:
    """The samples of a folded profile (``frame;frame;… count`` per line, root first) and its ``limit``
    functions with most samples of their own, each with its share of them and of the samples under it."""
    own: Counter[str] = Counter()
    under: Counter[str] = Counter()
    samples = 0
    for line in folded:
        stack, _, count_text = line.rstrip("\n").rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_function(frame) for frame in stack.split(";")]
        samples += count
        own[frames[-1]] += count
        for function in set(frames):
            under[function] += count
    if samples == 0:
        return 0, []
    return samples, [
        Entry(function, round(n / samples, 4), round(under[function] / samples, 4))
        for function, n in own.most_common(limit)
    ]


def _function(frame: str) -> str:
    """``name (path/to/module.py:123)`` → ``name (module.py)``: lines apart, one function."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rpartition(":")[0] or where.rstrip(")")
    parts = Path(path).parts
    # The package path from the last site-packages or src directory, so that ours and a library's read alike.
    for marker in ("site-packages", "src", "lib"):
        if marker in parts:
            parts = parts[len(parts) - parts[::-1].index(marker) :]
            break
    return f"{name} ({'/'.join(parts[-4:])})" if parts else name


def summarise(directory: Path, limit: int = 15) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for path in sorted(directory.glob("*.txt")):
        samples, entries = top(path.read_text(encoding="utf-8", errors="replace").splitlines(), limit)
        report[path.stem] = {
            "samples": samples,
            "top": [{"function": e.function, "self": e.self_share, "total": e.total_share} for e in entries],
        }
    return report


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("py-spy is not installed (make install installs it with the dev dependencies)")
    return found


async def _turn(nats_url: str, quick: bool) -> dict[str, Any]:
    from .turn import measure

    return await measure(nats_url, quick)


def _run_turn(directory: Path, quick: bool) -> None:
    os.environ[ENV_PROFILE] = str(directory)
    try:
        with tempfile.TemporaryDirectory(prefix="larkbot-profile-") as tmp:
            server = EmbeddedNats(Path(tmp) / "nats")
            url = server.start()
            try:
                figures = asyncio.run(_turn(url, quick))
            finally:
                server.stop()
    finally:
        del os.environ[ENV_PROFILE]
    print(json.dumps({"turn_overhead_ms (profiled)": figures["turn_overhead_ms"]}), file=sys.stderr)


def _run_pipeline(directory: Path, quick: bool) -> None:
    code = (
        "import asyncio, sys, tempfile\n"
        "from pathlib import Path\n"
        "from larkbot.runtime.natsserver import EmbeddedNats\n"
        "from larkbot.testkit.bench.pipeline import measure_service\n"
        "with tempfile.TemporaryDirectory() as tmp:\n"
        "    server = EmbeddedNats(Path(tmp) / 'nats')\n"
        "    url = server.start()\n"
        "    try:\n"
        f"        r = asyncio.run(measure_service(url, {5000 if quick else 50000}, 200, Path(tmp)))\n"
        "    finally:\n"
        "        server.stop()\n"
        "print(r, file=sys.stderr)\n"
    )
    command = [_py_spy(), "record", "--format", "raw", "--rate", str(RATE), "--nonblocking"]
    command += ["-o", str(directory / "pipeline-bench.txt"), "--", sys.executable, "-c", code]
    subprocess.run(command, check=True, timeout=1800)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/profiles"), help="where the profiles go")
    parser.add_argument("--only", choices=("turn", "pipeline"), action="append", help="one profile")
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--top", type=int, default=15, help="functions per profile")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    _py_spy()
    wanted = args.only or ["turn", "pipeline"]
    if "turn" in wanted:
        print("profiling the turn bench (py-spy on each service)…", file=sys.stderr)
        _run_turn(args.out, args.quick)
    if "pipeline" in wanted:
        print("profiling the pipeline bench…", file=sys.stderr)
        _run_pipeline(args.out, args.quick)
    print(json.dumps(summarise(args.out, args.top), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
