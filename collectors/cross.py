"""The competing flows' part of a run's metrics: each flow's throughput over the run's
traffic window, Jain's fairness index across the run's connection and the flows, and the
connection's share (mprig/run/fairness.py), from the flows' logs in the bundle and the window
run.json records (`cross_traffic.window`)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from collectors.runinfo import RunInfo
from collectors.runparts import Part
from mprig.campaign.crossspec import CrossFlow
from mprig.run import crossflow, fairness

if TYPE_CHECKING:
    import pandas as pd

# runs.parquet; then `cross_bps.<path>.<n>` per flow and `cross_share.<path>.<n>` per
# competing flow (its share of what the run's connection and the competing flows received)
COLUMNS = ("jain_index", "main_share")


def flow_refs(info: RunInfo) -> list[crossflow.FlowRef]:
    """The run's competing flows, from run.json's paths; ValueError if one is malformed."""
    paths = []
    for path in info.record.get("paths") or []:
        if isinstance(path, dict) and path.get("cross_traffic"):
            flows = [CrossFlow.model_validate(f) for f in path["cross_traffic"]]
            paths.append((str(path.get("name")), flows))
    return crossflow.flow_refs(paths, info.direction)


def competing(info: RunInfo, refs: list[crossflow.FlowRef]) -> list[str]:
    """The flows sharing a queue with the run's connection, as the runner chose them."""
    v, record = info.variant, info.record
    names = [str(p.get("name")) for p in record.get("paths") or [] if isinstance(p, dict)]
    used = crossflow.used_paths(str(v.get("protocol")), v.get("path"), v.get("paths"), names)
    shared = (record.get("shared_bottleneck") or {}).get("paths") or []
    return crossflow.competing(refs, used, shared, info.direction)


def cross_part(info: RunInfo, main_bps: float | None) -> Part:
    """`jain_index`, `main_share`, `cross_bps.<flow>` and each flow's received-rate series
    (source "cross"); nothing for a run without competing flows. `main_bps` is the run's
    connection's throughput (iperf3's receiver figure; run.json's summary otherwise)."""
    part = Part()
    record = info.record.get("cross_traffic")
    if not isinstance(record, dict):
        return part
    try:
        refs = flow_refs(info)
        window = (float(record["window"][0]), float(record["window"][1]))
        logs = crossflow.read_logs(info.bundle, refs)
    except (OSError, ValueError, KeyError, TypeError, IndexError, ValidationError) as e:
        part.problems.append(f"cross traffic: {type(e).__name__}: {e}")
        return part
    if main_bps is None:
        main_bps = float((info.record.get("summary") or {}).get("throughput_bps") or 0.0)
    doc = fairness.summary(main_bps, logs, window, competing(info, refs))
    part.metrics["cross_traffic"] = doc
    part.metrics["columns"] = {k: doc[k] for k in COLUMNS} | {
        f"cross_bps.{label}": flow["throughput_bps"] for label, flow in doc["flows"].items()
    }
    part.metrics["columns"] |= shares(doc)
    part.series += [_series(ref, logs[ref.label]) for ref in refs]
    return part


def shares(doc: dict[str, Any]) -> dict[str, float]:
    """`cross_share.<flow>` of each competing flow, from a fairness.summary document: the
    same total as `main_share` (the connection and the competing flows), so they add to 1."""
    rates = {label: float(doc["flows"][label]["throughput_bps"]) for label in doc["competing"]}
    total = float(doc["main_bps"]) + sum(rates.values())
    return {f"cross_share.{label}": bps / total for label, bps in rates.items()} if total else {}


def _series(ref: crossflow.FlowRef, log: fairness.FlowLog) -> pd.DataFrame:
    """A flow's received rate between consecutive samples, bits/s (at the later one)."""
    import pandas as pd

    pairs = list(itertools.pairwise(log.samples))
    rates = [(b1 - b0) * 8 / (t1 - t0) for (t0, b0), (t1, b1) in pairs if t1 > t0]
    times = [t1 for (t0, _), (t1, _) in pairs if t1 > t0]
    return pd.DataFrame(
        {
            "time": times,
            "source": "cross",
            "metric": "throughput_bps",
            "path": ref.path,
            "subflow": ref.label,
            "value": rates,
        }
    )


def cross_columns(rows: list[dict[str, Any]]) -> list[str]:
    """The runs.parquet columns of the competing flows, when any run has them."""
    flows = sorted({c for r in rows for c in r if c.startswith("cross_bps.")})
    flows += sorted({c for r in rows for c in r if c.startswith("cross_share.")})
    return [*COLUMNS, *flows] if flows or any(r.get("jain_index") is not None for r in rows) else []
