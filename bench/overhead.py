"""Per-run orchestration overhead of `mprig run`: wall time minus traffic time.

    .venv/bin/python -m bench.overhead [--campaign FILE] [--no-vm-mode] [--no-native]
    .venv/bin/python -m bench.overhead --from-results results/smoke --wall 507

Runs a campaign (by default the smoke campaign's plan: 2 paths, MPTCP and single-path TCP
over each, two repetitions) with `--force` and reads every run.json. Per run, the overhead
is the run's wall time minus its traffic time (run.json `timings.overhead_s`: setup,
captures, stop, fetch, teardown), which the targets are for: <= 3 s per run natively and
in VM mode (software emulation). What happens once
per campaign (VM boot, rig up and down, host facts) is printed beside it, with the overhead
per run when that is spread over the campaign's runs.

Natively the campaign runs with --no-vm; where the kernel lacks sch_netem (so native mode
cannot run a real campaign), tbf at the path rates stands in for netem, with the same
commands and round trips. VM mode runs with --vm (software emulation without KVM).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from mprig.run.impair import STANDIN_ENV

OUT = Path(__file__).resolve().parent / "out"
TARGET_NATIVE_S = 3.0
TARGET_VM_S = 3.0
SMOKE = Path(__file__).resolve().parent.parent / "experiments" / "smoke.yaml"


def run_campaign(
    spec: Path, mode: str, *, tbf_for_netem: bool = False
) -> tuple[float, list[dict[str, object]]]:
    """`mprig run` in `mode` ("--vm" or "--no-vm"); wall seconds and every run.json."""
    results = OUT / f"results{mode.replace('-', '_')}"
    shutil.rmtree(results, ignore_errors=True)  # bundles of earlier plans would be counted
    argv = [sys.executable, "-m", "mprig.cli", "run", str(spec), mode, "--force", "--quiet"]
    argv += ["--results", str(results), "--rig", "benchov"]
    env = {**os.environ, STANDIN_ENV: "1"} if tbf_for_netem else None
    t0 = time.monotonic()
    code = subprocess.call(argv, stdout=subprocess.DEVNULL, env=env)
    wall = time.monotonic() - t0
    if code != 0:
        raise SystemExit(f"bench.overhead: `mprig run {mode}` exited {code}")
    name = yaml.safe_load(spec.read_text())["name"]
    records = [json.loads(p.read_text()) for p in sorted((results / name).glob("*/run.json"))]
    return wall, records


def report(label: str, wall: float, records: list[dict[str, object]], target: float) -> float:
    """Print per-run and per-campaign figures; returns the per-run overhead (each run's wall
    time minus its traffic time, as run.json records it), which the target is for."""
    timings = [r["timings"] for r in records]  # type: ignore[index]
    traffic = sum(t["traffic_s"] for t in timings)  # type: ignore[index]
    per_run = statistics.mean(t["overhead_s"] for t in timings)  # type: ignore[index]
    in_runs = sum(t["ended"] - t["started"] for t in timings)  # type: ignore[index]
    fixed = wall - in_runs  # once per campaign: VM boot, rig up and down, host facts
    stages: dict[str, list[float]] = {}
    for t in timings:
        for name, seconds in t.get("stages", {}).items():  # type: ignore[union-attr]
            stages.setdefault(name, []).append(seconds)
    print(f"{label}: {len(records)} runs, wall {wall:.1f} s, traffic {traffic:.1f} s")
    print(f"  per run: {per_run:.2f} s overhead (run wall - traffic; target <= {target:.0f} s)")
    print(
        "  stage means: " + ", ".join(f"{k} {statistics.mean(v):.2f} s" for k, v in stages.items())
    )
    amortised = (wall - traffic) / len(records)
    print(
        f"  once per campaign: {fixed:.1f} s (VM boot where used, rig up/down, host facts);"
        f" with it spread over these runs: {amortised:.2f} s per run"
    )
    if per_run < target < amortised:
        runs = math.ceil(fixed / (target - per_run))
        print(f"  spread over {runs} runs or more it is <= {target:.0f} s")
    return per_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--campaign",
        type=Path,
        default=SMOKE,
        metavar="FILE",
        help="the campaign whose plan is measured (default: experiments/smoke.yaml)",
    )
    parser.add_argument("--no-vm-mode", action="store_true", help="skip the VM mode measurement")
    parser.add_argument("--no-native", action="store_true", help="skip the native measurement")
    parser.add_argument(
        "--from-results",
        type=Path,
        metavar="DIR",
        help="only report on a campaign already run in VM mode (its results dir)",
    )
    parser.add_argument(
        "--wall",
        type=float,
        default=0.0,
        help="with --from-results: the wall seconds that `mprig run` took",
    )
    args = parser.parse_args()
    if args.from_results:
        records = [json.loads(p.read_text()) for p in sorted(args.from_results.glob("*/run.json"))]
        wall = args.wall or sum(r["timings"]["ended"] - r["timings"]["started"] for r in records)
        vm_run = report("VM mode (from results)", wall, records, TARGET_VM_S)
        print(f"  VM mode target <= {TARGET_VM_S:.0f} s per run: ratio {vm_run / TARGET_VM_S:.2f}")
        return 0 if vm_run <= TARGET_VM_S else 1
    from mprig.rig import vmprobe

    OUT.mkdir(parents=True, exist_ok=True)
    spec = args.campaign.resolve()
    ok, measured = True, False
    if args.no_native:
        pass
    elif vmprobe.netem_available():
        measured = True
        native = report("native", *run_campaign(spec, "--no-vm"), TARGET_NATIVE_S)
        ok &= native <= TARGET_NATIVE_S
        print(f"  native target <= {TARGET_NATIVE_S:.0f} s: ratio {native / TARGET_NATIVE_S:.2f}")
    elif vmprobe.tbf_available():
        measured = True
        print(
            "native: this kernel has no sch_netem, so tbf at each path's rate stands in for"
            " netem (same commands and round trips; no delay, so the traffic differs)"
        )
        native = report(
            "native (tbf for netem)",
            *run_campaign(spec, "--no-vm", tbf_for_netem=True),
            TARGET_NATIVE_S,
        )
        ok &= native <= TARGET_NATIVE_S
        print(f"  native target <= {TARGET_NATIVE_S:.0f} s: ratio {native / TARGET_NATIVE_S:.2f}")
    else:
        print("native: not measurable here (neither sch_netem nor sch_tbf on this kernel)")
    if not args.no_vm_mode:
        measured = True
        vm_run = report("VM mode", *run_campaign(spec, "--vm"), TARGET_VM_S)
        print(f"  VM mode target <= {TARGET_VM_S:.0f} s per run: ratio {vm_run / TARGET_VM_S:.2f}")
        ok &= vm_run <= TARGET_VM_S
    if not measured:
        print("nothing measured")
        return 1
    print("targets hold" if ok else "targets missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
