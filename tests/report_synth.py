"""Seeded synthetic result sets in the documented layout (docs/bundle.md), for report,
compare and nightly tests: campaign.json, <run>/run.json, <run>/timeseries.parquet and
runs.parquet. The numbers are drawn from simple, seeded models so tests know the truth."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mprig.campaign.spec import Campaign
from mprig.run.bundle import sha256_file

AXIS = "paths.wifi.distance_m"


@dataclass
class Synth:
    """Parameters of one synthetic campaign."""

    name: str = "synth"
    variants: Sequence[str] = ("nopr", "dsack")
    distances: Sequence[float] = (10.0, 50.0)
    repetitions: int = 5
    seed: int = 1  # the campaign seed (part of the spec)
    noise: int = 1  # seed of the synthetic measurement noise
    cv: float = 0.05  # coefficient of variation of throughput over repetitions
    scale: dict[str, float] = field(default_factory=dict)  # metric -> factor (a regression)
    failed: Sequence[str] = ()  # run ids recorded as failed
    dropped: Sequence[str] = ()  # run ids planned but absent (a partial campaign)
    omit_metrics: Sequence[str] = ()  # metric columns left out of runs.parquet
    flags: dict[str, list[str]] = field(default_factory=dict)  # run id -> run.json flags
    # run id -> how its rig limited it: "cpu" (run.json rig_cpu) or "not_realtime" (ns-3 lag)
    rig_limited: dict[str, str] = field(default_factory=dict)
    undefined: dict[str, tuple[str, ...]] = field(default_factory=dict)  # variant -> null metrics
    timeseries: bool = True
    references: Sequence[str] = ()
    available_cc: str | None = "reno cubic"  # None: not recorded in run.json


def spec(s: Synth) -> Campaign:
    return Campaign.model_validate(
        {
            "name": s.name,
            "description": "synthetic campaign for report tests",
            "paths": [
                {
                    "name": "wifi",
                    "kind": "wifi",
                    "down": {"rate_mbit": 20, "delay_ms": 5},
                    "up": {"rate_mbit": 20, "delay_ms": 5},
                    "distance_m": 10,
                    "wifi_standard": "11g",
                },
                {
                    "name": "cell",
                    "kind": "cellular",
                    "down": {"rate_mbit": 10, "delay_ms": 30},
                    "up": {"rate_mbit": 5, "delay_ms": 30},
                },
            ],
            "variants": [{"name": v, "recovery": v} for v in s.variants],
            "sweep": {"axes": {AXIS: list(s.distances)}},
            "repetitions": s.repetitions,
            "seed": s.seed,
            "references": list(s.references),
        }
    )


def run_id(variant: str, distance: float, rep: int) -> str:
    return f"{variant}-d{int(distance)}-r{rep}"


def plan(s: Synth) -> list[dict[str, Any]]:
    return [
        {
            "run_id": run_id(v, d, r),
            "index": i,
            "repetition": r,
            "variant": v,
            "point": {AXIS: d},
        }
        for i, (v, d, r) in enumerate(
            (v, d, r) for v in s.variants for d in s.distances for r in range(1, s.repetitions + 1)
        )
    ]


def _metrics(s: Synth, rng: np.random.Generator, variant: str, distance: float) -> dict[str, Any]:
    base = (30e6 if variant == s.variants[0] else 24e6) * (1 - distance / 200)
    thr = base * rng.lognormal(0, s.cv) * s.scale.get("throughput_bps", 1.0)
    good = thr * 0.93 * rng.lognormal(0, s.cv / 4) * s.scale.get("goodput_bps", 1.0)
    ooo = min(0.9, 0.05 * (1 + distance / 50) * rng.lognormal(0, 0.1))
    wifi_share = 0.6
    return {
        "throughput_bps": thr,
        "goodput_bps": good,
        "iperf3_bps": good * 0.99,
        "ooo_ratio": ooo * s.scale.get("ooo_ratio", 1.0),
        "ooo_max_bytes": int(200_000 * ooo * rng.lognormal(0, 0.1)),
        "ooo_max_packets": int(140 * ooo * rng.lognormal(0, 0.1)),
        "ooo_mean_bytes": 30_000 * ooo,
        "retransmitted_packets": int(rng.poisson(200)),
        "duplicate_packets": int(rng.poisson(40)),
        "reinjected_bytes": int(rng.poisson(50)) * 1400,
        "unmapped_bytes": 0,
        "link_util.wifi": thr * wifi_share / 20e6,
        "link_util.cell": thr * (1 - wifi_share) / 10e6,
        "throughput_bps.wifi": thr * wifi_share,
        "throughput_bps.cell": thr * (1 - wifi_share),
        "rcvbuf_k_max_bytes": int(150_000 * rng.lognormal(0, 0.1)),
        "srtt_ms.wifi": 12 * rng.lognormal(0, 0.05),
        "srtt_ms.cell": 65 * rng.lognormal(0, 0.05),
        "cwnd_mean.wifi": 40 * rng.lognormal(0, 0.1),
        "cwnd_mean.cell": 25 * rng.lognormal(0, 0.1),
    }


def _run_json(s: Synth, p: dict[str, Any], status: str, campaign: Campaign) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": 1,
        "campaign": s.name,
        **{k: p[k] for k in ("run_id", "index", "repetition", "point")},
        "seed": 1000 + p["index"],
        "status": status,
        "attempts": 1 if status == "complete" else 3,
        "variant": next(
            v for v in campaign.model_dump(mode="json")["variants"] if v["name"] == p["variant"]
        ),
        "paths": campaign.model_dump(mode="json")["paths"],
        "flags": s.flags.get(p["run_id"], []),
        "hosts": {
            h: {
                "kernel": "6.1.0-56-amd64",
                "sysctls": {}
                if s.available_cc is None
                else {"net.ipv4.tcp_available_congestion_control": s.available_cc},
                "tools": {"iperf3": "3.12", "tcpdump": "4.99.3"},
            }
            for h in ("client", "server")
        },
        "capture": {
            "snaplen": 200,
            "hosts": ["client", "server"],
            "kernel_drops": {"client": 0, "server": 0},
        },
        "rig_mode": "virtual-vm",
        "mprig": {"version": "0.1.0", "git": "synthetic"},
    }
    if status != "complete":
        doc["reason"] = "iperf3 on client: connection refused after 3 attempts"
    how = s.rig_limited.get(p["run_id"])
    if how == "cpu":
        doc["flags"] = [*doc["flags"], "rig_limited"]
        doc["rig_cpu"] = {"rig_limited": True, "cause": "other work took 22 % of the host's CPUs"}
    elif how == "not_realtime":
        doc["flags"] = [*doc["flags"], "not_realtime"]
        limits = {"lag_p95_ms": 5, "lag_max_ms": 50}
        doc["engine"] = {"lag_p95_ms": 9, "lag_max_ms": 80, "limits": limits}
    return doc


def _timeseries(rng: np.random.Generator, n: int = 50) -> pd.DataFrame:
    t = np.arange(n) * 0.1
    frames = []
    for path, cw in (("wifi", 40.0), ("cell", 25.0)):
        frames.append(
            pd.DataFrame(
                {
                    "t_s": t,
                    "series": "cwnd",
                    "path": path,
                    "value": cw + 5 * np.sin(t) + rng.normal(0, 1, n),
                }
            )
        )
    frames.append(
        pd.DataFrame(
            {
                "t_s": t,
                "series": "ooo_bytes",
                "path": "",
                "value": np.abs(rng.normal(20_000, 8_000, n)),
            }
        )
    )
    return pd.concat(frames, ignore_index=True)


def write(root: Path, s: Synth | None = None) -> Path:
    """Write a synthetic results directory at ROOT and return ROOT."""
    s = s or Synth()
    campaign = spec(s)
    rng = np.random.default_rng(s.noise)
    root.mkdir(parents=True, exist_ok=True)
    planned = plan(s)
    (root / "campaign.json").write_text(
        json.dumps({"format": 1, "spec": campaign.model_dump(mode="json"), "plan": planned})
    )
    rows = []
    for p in planned:
        if p["run_id"] in s.dropped:
            continue
        status = "failed" if p["run_id"] in s.failed else "complete"
        values = _metrics(s, rng, p["variant"], p["point"][AXIS])
        if status != "complete":
            values = {k: None for k in values}
        values.update({k: None for k in s.undefined.get(p["variant"], ())})
        rows.append(
            {
                "campaign": s.name,
                "run_id": p["run_id"],
                "variant": p["variant"],
                "protocol": "mptcp",
                "status": status,
                "index": p["index"],
                "repetition": p["repetition"],
                "seed": 1000 + p["index"],
                f"param.{AXIS}": p["point"][AXIS],
                **values,
            }
        )
        bundle = root / p["run_id"]
        bundle.mkdir(exist_ok=True)
        # one artifact per run, hashed in run.json as the runner does (reports verify it)
        (bundle / "iperf3-client.json").write_text(json.dumps({"run": p["run_id"]}))
        record = _run_json(s, p, status, campaign)
        record["artifacts"] = {"iperf3-client.json": sha256_file(bundle / "iperf3-client.json")}
        (bundle / "run.json").write_text(json.dumps(record))
        if status == "complete":  # collected: metrics.json names the run.json it was made from
            _collected(bundle)
        if s.timeseries and status == "complete":
            _timeseries(np.random.default_rng(p["index"])).to_parquet(bundle / "timeseries.parquet")
    runs = pd.DataFrame(rows).drop(columns=list(s.omit_metrics))
    for col in runs.columns:
        if col not in ("campaign", "run_id", "variant", "protocol", "status"):
            runs[col] = pd.to_numeric(runs[col])
    runs.to_parquet(root / "runs.parquet")
    return root


def _collected(bundle: Path) -> None:
    """The part of `mprig collect`'s metrics.json that says which run.json it analysed."""
    inputs = {"sha256": {"run.json": sha256_file(bundle / "run.json")}}
    (bundle / "metrics.json").write_text(json.dumps({"format": 1, "inputs": inputs}))
