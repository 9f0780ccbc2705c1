"""A run's record, run.json (docs/running.md lists its keys): what was planned, what ran,
what was read back, the flags that qualify the result, and mprig's version and git
revision.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any

from mprig import __version__
from mprig.campaign.plan import Run, bottleneck_json
from mprig.rig import vm
from mprig.run import bundle
from mprig.run.run_attempt import Attempt, Context, Outcome


def make_record(
    ctx: Context, run: Run, a: Attempt, out: Outcome, status: str, reason: str
) -> dict[str, Any]:
    """run.json for one run (artifacts and format are added by bundle.commit)."""
    hosts = {h: {**f, "sysctls": out.sysctls.get(h, {})} for h, f in ctx.facts.items()}
    for h, counts in out.flushed.items():
        if h in hosts and counts:
            hosts[h]["flushed"] = counts
    cap = run.capture.model_dump(mode="json")
    record: dict[str, Any] = {
        "format": bundle.FORMAT,
        "campaign": ctx.campaign.name,
        "run_id": run.run_id,
        "index": run.index,
        "repetition": run.repetition,
        "seed": run.seed,
        "status": status,
        **({"reason": reason} if reason else {}),
        "attempts": 1,
        "point": run.point,
        "variant": run.variant.model_dump(mode="json"),
        "paths": [p.model_dump(mode="json") for p in run.paths],
        "links": [_link(link) for link in ctx.rig.paths],
        "server_addr": ctx.rig.server_addr,
        "traffic": run.traffic.model_dump(mode="json"),
        "capture": {**cap, "kernel_drops": out.drops, "ss_interval": out.ss_interval},
        "flags": run_flags(out),
        "rig_cpu": out.rig_cpu,
        **({"engine": out.engine} if out.engine else {}),
        **({"attenuation": out.attenuation} if out.attenuation else {}),
        "timings": {"traffic_s": round(out.traffic_s, 3), "stages": a.stage_s},
        "summary": out.summary,
        **({"cross_traffic": out.cross} if out.cross else {}),
        **({"timeline": out.timeline} if out.timeline else {}),
        **bottleneck_json(run.bottleneck),
        "hosts": hosts,
        "settings": out.settings,
        "mprig": {"version": __version__, "git": git_revision()},
        "commands": a.log,
        "rig_mode": ctx.rig.mode,
        "acceleration": vm.acceleration() if ctx.rig.mode.startswith("virtual") else "none (lab)",
    }
    return record


def run_flags(out: Outcome) -> list[str]:
    """capture_drops: tcpdump lost packets; ss_interval: the ss sampler's median interval
    was more than 20 % over its configured one (cwnd and RTT series are coarser);
    rig_limited: the rig's CPU (or the VM's host) was saturated during the traffic;
    not_realtime: an ns-3 engine lagged behind the wall clock past its limits."""
    flags = ["capture_drops"] if any(out.drops.values()) else []
    median, want = out.ss_interval.get("median_s"), out.ss_interval.get("configured_s")
    if median is not None and want and median > 1.2 * want:
        flags.append("ss_interval")
    if out.rig_cpu.get("rig_limited"):
        flags.append("rig_limited")
    if out.engine.get("realtime") is False:
        flags.append("not_realtime")
    return flags


def _link(link: Any) -> dict[str, str]:
    return {
        "name": link.name,
        "client_if": link.client_if,
        "client_addr": link.client_addr,
        "router": link.router,
    }


_GIT: list[str] = []


def git_revision() -> str:
    """The git revision of the mprig source tree ("unknown" outside a checkout)."""
    if not _GIT:
        src = Path(__file__).resolve().parents[2]
        try:
            p = subprocess.run(
                ["git", "-C", str(src), "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            )
            _GIT.append(p.stdout.strip() or "unknown")
        except (OSError, subprocess.TimeoutExpired):
            _GIT.append("unknown")
    return _GIT[0]


def write_partial_record(ctx: Context, run: Run, a: Attempt, out: Outcome, reason: str) -> None:
    """Commit an interrupted run's bundle (whatever was fetched) so `status` shows it."""
    record = make_record(ctx, run, a, out, "interrupted", reason)
    record["timings"].update(ended=round(time.time(), 3))
    with contextlib.suppress(OSError):
        bundle.commit(ctx.results, run.run_id, record)
