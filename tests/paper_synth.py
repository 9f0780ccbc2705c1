"""Synthetic results of a real paper campaign (experiments/papers/*.yaml): the campaign's own
plan, run.json files as the runner writes them (variant, per-run paths, host facts) and a
runs.parquet whose metrics come from a model the test chooses. Verdict tests run the shipped
references against them, so the conditions meet the variants a full profile really runs."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mprig.campaign import wifi
from mprig.campaign.plan import Run, expand
from mprig.campaign.spec import load_campaign
from mprig.run.bundle import sha256_file

PAPERS = Path(__file__).resolve().parents[1] / "experiments" / "papers"
ALL_CC = "reno cubic lia olia prr door cwa prr_lia door_lia"
KERNEL = "6.12.0-synthetic"

Model = Callable[[Run, np.random.Generator], dict[str, float]]


def used_paths(run: Run) -> list[Any]:
    names = (run.variant.path,) if run.variant.protocol == "tcp" else run.variant.paths
    return [p for p in run.paths if names is None or p.name in names]


def capacity_bps(run: Run) -> float:
    """The configured rate of the run's paths (the Wi-Fi model applied), bits/s."""
    return sum(wifi.effective_path(p).down.rate_mbit * 1e6 for p in used_paths(run))


def healthy(
    run: Run, rng: np.random.Generator, share: float = 0.8, cv: float = 0.05
) -> dict[str, float]:
    """Every metric the references use, at SHARE of the configured capacity."""
    thr = capacity_bps(run) * share * rng.lognormal(0, cv)
    paths = used_paths(run)
    out: dict[str, float] = {
        "throughput_bps": thr,
        "goodput_bps": thr * 0.97,
        "iperf3_bps": thr * 0.96,
        "ooo_ratio": 0.1 * rng.lognormal(0, 0.1),
        "ooo_max_bytes": 150_000 * rng.lognormal(0, 0.1),
        "rcvbuf_k_max_bytes": 145_000 * rng.lognormal(0, 0.1),
    }
    for p in paths:
        rate = wifi.effective_path(p).down.rate_mbit * 1e6
        out[f"throughput_bps.{p.name}"] = thr / len(paths)
        out[f"link_util.{p.name}"] = thr / len(paths) / rate
    return out


def write(
    root: Path,
    campaign: str,
    model: Model = healthy,
    *,
    repetitions: int | None = None,
    noise: int = 1,
    available_cc: str = ALL_CC,
    kernels: Sequence[str | dict[str, str]] = (KERNEL,),
    attempts: dict[int, int] | None = None,
    reasons: dict[int, list[str]] | None = None,
) -> Path:
    """Results of experiments/papers/CAMPAIGN.yaml at ROOT, metrics from MODEL; run i of the
    plan ran on KERNELS[i % len(KERNELS)] (a release for every host, or one per host) and
    took ATTEMPTS[i] attempts (run.json `attempts`; 1 when not given), its discarded ones
    ending for REASONS[i] (run.json `earlier_attempts`)."""
    spec = load_campaign(PAPERS / f"{campaign}.yaml")
    if repetitions is not None:
        spec = spec.model_copy(update={"repetitions": repetitions})
    rng = np.random.default_rng(noise)
    root.mkdir(parents=True, exist_ok=True)
    runs = expand(spec)
    plan = [
        {
            "run_id": r.run_id,
            "index": r.index,
            "repetition": r.repetition,
            "variant": r.variant.name,
            "point": r.point,
        }
        for r in runs
    ]
    (root / "campaign.json").write_text(
        json.dumps({"format": 1, "spec": spec.model_dump(mode="json"), "plan": plan})
    )
    rows = []
    for run in runs:
        rows.append(
            {
                "campaign": spec.name,
                "run_id": run.run_id,
                "variant": run.variant.name,
                "protocol": run.variant.protocol,
                "status": "complete",
                "index": run.index,
                "repetition": run.repetition,
                "seed": run.seed,
                **{f"param.{k}": v for k, v in run.point.items()},
                **model(run, rng),
            }
        )
        bundle = root / run.run_id
        bundle.mkdir(exist_ok=True)
        # one artifact per run, hashed in run.json as the runner does (reports verify it)
        (bundle / "iperf3-client.json").write_text(json.dumps({"run": run.run_id}))
        record = _run_json(run, available_cc, kernels[run.index % len(kernels)])
        record["attempts"] = (attempts or {}).get(run.index, 1)
        if why := (reasons or {}).get(run.index):
            record["earlier_attempts"] = [{"attempt": n, "reason": r} for n, r in enumerate(why, 1)]
        record["artifacts"] = {"iperf3-client.json": sha256_file(bundle / "iperf3-client.json")}
        (bundle / "run.json").write_text(json.dumps(record))
        _collected(bundle)  # metrics.json names the run.json it was made from
    pd.DataFrame(rows).to_parquet(root / "runs.parquet")
    return root


def _run_json(run: Run, available_cc: str, kernel: str | dict[str, str]) -> dict[str, Any]:
    per_host = kernel if isinstance(kernel, dict) else {"client": kernel, "server": kernel}
    hosts = {
        name: {
            "kernel": per_host[name],
            "sysctls": {"net.ipv4.tcp_available_congestion_control": available_cc},
            "tools": {"iperf3": "3.18"},
        }
        for name in ("client", "server")
    }
    return {
        "format": 1,
        "run_id": run.run_id,
        "index": run.index,
        "repetition": run.repetition,
        "point": run.point,
        "seed": run.seed,
        "status": "complete",
        "variant": run.variant.model_dump(mode="json"),
        "paths": [p.model_dump(mode="json") for p in run.paths],
        "hosts": hosts,
        "rig_mode": "virtual",
    }


def _collected(bundle: Path) -> None:
    """The part of `mprig collect`'s metrics.json that says which run.json it analysed."""
    inputs = {"sha256": {"run.json": sha256_file(bundle / "run.json")}}
    (bundle / "metrics.json").write_text(json.dumps({"format": 1, "inputs": inputs}))


def rejudged(reproduction: Path, tmp: Path) -> tuple[str, str]:
    """report.md of a reproduction written from the results under REPRODUCTION's grandparent,
    and of a copy of it judged again from its own files (reproduce_committed.rejudge)."""
    import shutil

    from reports import reproduce_committed

    copy = tmp / reproduction.name
    shutil.copytree(reproduction, copy)
    before = (copy / "report.md").read_text()
    reproduce_committed.rejudge(copy, reproduction.parent.parent / "results")
    return before, (copy / "report.md").read_text()
