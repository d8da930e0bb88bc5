"""The PNG of a ``make bench-load`` report: four panels over the run's time — turn latency (p50 and p99 of
the replies of each sample), consumer lag (ingress, ``EVENTS``, ``CONTEXT``, ``MEDIA``), each service's
resident memory, and the cores each service kept busy beside the machine's load average (which counts
every process on it, the other work too) — with the end of the traffic and each service restart marked.

matplotlib with its Agg backend (no display): a PNG from the report's numbers alone, so a report can be
plotted again without running the load.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

__all__ = ["plot"]


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    samples = report["samples"]
    minutes = [s["t_s"] / 60 for s in samples]
    figure, (latency, lag, memory, cpu) = pyplot.subplots(4, 1, figsize=(10, 12), sharex=True)
    options = report["options"]
    chats = sum(options["chats"].values())
    turns = report["turns"]
    load = report["machine"]["loadavg_before"][0]
    figure.suptitle(
        f"{chats} chats, {options['acts_per_chat_per_min']:g} act(s) per chat a minute for "
        f"{options['seconds'] / 60:g} min: {turns['answered']}/{turns['asked']} mentions answered\n"
        f"{report['machine']['cpus']} cores shared with other work (load average {load:g} at the start)",
        fontsize=10,
    )
    for quantile, style in (("p50", "-"), ("p99", ":")):
        values = [s[f"turn_{quantile}_ms"] for s in samples]
        latency.plot(minutes, [v if v is not None else float("nan") for v in values], style, label=quantile)
    latency.set_ylabel("turn latency (ms)")
    latency.set_yscale("log")
    for key in samples[0]["lag"] if samples else ():
        values = [s["lag"][key] for s in samples]
        lag.plot(minutes, [v if v is not None else float("nan") for v in values], label=key)
    lag.set_ylabel("consumer lag (messages)")
    for name in samples[0]["rss_mib"] if samples else ():
        values = [s["rss_mib"][name] for s in samples]
        memory.plot(minutes, [v if v is not None else float("nan") for v in values], label=name)
    memory.set_ylabel("resident memory (MiB)")
    for name in samples[0]["cpu_s"] if samples else ():
        cpu.plot(minutes[1:], _busy(samples, name), label=name)
    cpu.set_ylabel("cores busy")
    # The machine's load average counts every runnable process, the other work's too: its own axis.
    machine = cpu.twinx()
    machine.plot(minutes, [s["loadavg"] for s in samples], "k--", linewidth=0.8)
    machine.set_ylabel("machine load average (dashed)")
    machine.set_ylim(bottom=0)
    cpu.set_xlabel("minutes")
    end = report["traffic_s"] / 60
    for axes in (latency, lag, memory, cpu):
        axes.axvline(end, color="grey", linewidth=0.8, linestyle="--")
        axes.grid(True, linewidth=0.3)
        axes.legend(fontsize=8, loc="upper left")
    latency.annotate("traffic ends", (end, 1), xycoords=("data", "axes fraction"), fontsize=8, va="top")
    for restart in report["restarts"]:
        at = restart["t_s"] / 60
        for axes in (latency, lag, memory, cpu):
            axes.axvline(at, color="red", linewidth=0.8)
        label = f" {restart['service']} exited ({restart['status']}), restarted"
        red: dict[str, Any] = {"fontsize": 7, "color": "red", "va": "top", "rotation": 90}
        lag.annotate(label, (at, 0.98), xycoords=("data", "axes fraction"), **red)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    pyplot.close(figure)


def _busy(samples: list[dict[str, Any]], name: str) -> list[float]:
    """The cores the service kept busy between consecutive samples (CPU seconds over wall seconds)."""
    busy = []
    for before, after in itertools.pairwise(samples):
        used, was = after["cpu_s"][name], before["cpu_s"][name]
        wall = after["t_s"] - before["t_s"]
        known = used is not None and was is not None and wall > 0
        busy.append((used - was) / wall if known else float("nan"))
    return busy
