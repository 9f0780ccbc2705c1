"""The application workloads' part of a run's metrics (traffic tools requests and cbr):
per-request completion times and per-frame delays from the logs the agents left in the
bundle, as runs.parquet columns, metrics.json `apps` and timeseries.parquet series."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from collectors.runinfo import RunInfo
from collectors.runparts import Part, read_text
from mprig.campaign.apps_spec import Cbr
from mprig.run import apps

if TYPE_CHECKING:
    import pandas as pd

REQUEST_COLUMNS: tuple[str, ...] = ("request_time_p50_s", "request_time_p95_s")
REQUEST_COLUMNS += ("request_time_p99_s", "request_time_mean_s", "requests_completed")
REQUEST_COLUMNS += ("request_failures",)
FRAME_COLUMNS: tuple[str, ...] = ("frame_delay_p50_s", "frame_delay_p95_s", "frame_delay_p99_s")
FRAME_COLUMNS += ("frame_miss_ratio", "frame_misses")
COLUMNS = REQUEST_COLUMNS + FRAME_COLUMNS  # null for the other tools
INT_COLUMNS = ("requests_completed", "request_failures", "frame_misses")


def apps_part(info: RunInfo) -> Part:
    """The requests or cbr columns of a run (nothing for the other tools)."""
    if info.tool == "requests":
        return requests_part(info)
    if info.tool == "cbr":
        return cbr_part(info)
    return Part()


def requests_part(info: RunInfo) -> Part:
    """`request_time_<q>_s`, the mean, completed and failed requests, and every completed
    request's time as a series (source "requests", at its start)."""
    part = Part()
    text = read_text(info.bundle, apps.REQUESTS_LOG, part)
    if text is None:
        return part
    try:
        r = apps.parse_requests(text)
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (ValueError, KeyError, TypeError) as e:
        part.problems.append(f"{apps.REQUESTS_LOG}: not the client's request log ({e!r})")
        return part
    part.metrics |= {f"request_time_{q}_s": getattr(r, f"{q}_s") for q in ("p50", "p95", "p99")}
    part.metrics |= {"request_time_mean_s": r.mean_s, "requests_completed": r.completed}
    part.metrics["request_failures"] = r.failures
    part.metrics["apps"] = {"requests": r.n, "completed": r.completed, "failures": r.failures,
                            "max_s": r.max_s, "first_error": r.first_error}  # fmt: skip
    ok = [x for x in rows if x["ok"]]
    part.series.append(_series("requests", "request_time_s", ok, "start_ns", "time_s"))
    return part


def cbr_part(info: RunInfo) -> Part:
    """`frame_delay_<q>_s`, `frame_misses` and `frame_miss_ratio` against the run's own
    schedule and deadline, and every received frame's delay as a series (source "cbr")."""
    part = Part()
    traffic = info.record.get("traffic")
    try:
        cbr = Cbr.model_validate((traffic or {}).get("cbr"))
        duration = float(traffic["duration_s"])  # type: ignore[index]
    except (ValidationError, KeyError, TypeError, ValueError):
        part.problems.append("run.json: traffic.cbr is missing or not a cbr mapping")
        return part
    text = read_text(info.bundle, apps.CBR_LOG, part)
    if text is None:
        return part
    try:
        d = apps.parse_cbr(text, cbr.frames(duration), cbr.deadline_ms)
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (ValueError, KeyError, TypeError) as e:
        part.problems.append(f"{apps.CBR_LOG}: not the receiver's frame log ({e!r})")
        return part
    q = {p: getattr(d, f"{p}_ms") for p in ("p50", "p95", "p99")}
    part.metrics |= {f"frame_delay_{p}_s": None if v is None else v / 1e3 for p, v in q.items()}
    part.metrics |= {"frame_misses": d.misses, "frame_miss_ratio": d.miss_ratio}
    part.metrics["apps"] = {"frames": d.frames, "received": d.received, "misses": d.misses,
                            "deadline_ms": cbr.deadline_ms}  # fmt: skip
    for r in rows:
        r["delay_s"] = (int(r["recv_ns"]) - int(r["sched_ns"])) / 1e9
    part.series.append(_series("cbr", "frame_delay_s", rows, "recv_ns", "delay_s"))
    return part


def _series(
    source: str, metric: str, rows: list[dict[str, Any]], time_key: str, value_key: str
) -> pd.DataFrame:
    import pandas as pd

    at = pd.Series([int(r[time_key]) for r in rows], dtype="int64")  # float64 loses ns
    return pd.DataFrame(
        {
            "time": at / 1e9,
            "source": source,
            "metric": metric,
            "path": None,
            "subflow": None,
            "value": pd.Series([float(r[value_key]) for r in rows], dtype="float64"),
        }
    )
