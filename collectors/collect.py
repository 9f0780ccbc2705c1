"""`mprig collect`: turn every run bundle of a campaign into metrics.

Per complete run: the receiver's capture (connection-level reordering, goodput, per-subflow
throughput), the sender's ss samples, both hosts' nstat deltas and iperf3's own figures are
assembled into one metrics row, written as `metrics.json` and `timeseries.parquet` in the
bundle; the campaign's rows go to `runs.parquet` (columns: docs/bundle.md). Runs that did
not complete get a row with their status and null metrics. An unreadable artifact is
reported by file name and nulls only the metrics it feeds.

Collecting is idempotent: a bundle whose metrics.json was made from the same artifacts (by
sha256 of their content) with the same options is not analysed again (`force` re-analyses);
one whose metrics.json or time series was edited since is (collectors/collect_cache.py).

Integrity: a complete run whose artifacts do not match the sha256 that run.json records is
"corrupt": its row has that status and null metrics, and the mismatch is a problem; so is
one whose run.json disagrees with itself or campaign.json's plan (bundle.record_problem). Two
bundles of one run (the same run id, or the same recorded artifacts) are an error naming
both. One collect at a time per campaign directory (the campaign lock of `mprig run`), and
every file is written atomically (mprig/fsio.py).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collectors import apps_part, capture_part, collect_cache, latency_part, runparts
from collectors.cross import cross_columns, cross_part
from collectors.nstat import SENDER_COUNTERS, sender_counters
from collectors.runinfo import RunInfo
from collectors.ss import PATH_COLUMNS as SS_PATH_METRICS  # the sender's ss
from mprig import fsio
from mprig.errors import UsageError
from mprig.run import bundle as bundles

if TYPE_CHECKING:
    import pandas as pd

FORMAT = 1  # metrics.json format written here
COLLECTOR_VERSION = 8  # bump when a metric changes or is added: bundles are re-analysed
METRICS_JSON = collect_cache.METRICS_JSON
TIMESERIES = collect_cache.TIMESERIES
RUNS_PARQUET = "runs.parquet"

ID_COLUMNS = ("campaign", "run_id", "variant", "protocol", "status")
INT_ID_COLUMNS = ("index", "repetition", "seed")
FLOAT_METRICS: tuple[str, ...] = ("throughput_bps", "goodput_bps", "iperf3_bps", "ss_acked_bps")
FLOAT_METRICS += ("ooo_ratio", "ooo_mean_bytes", "goodput_k_p5_bps")
INT_METRICS: tuple[str, ...] = ("ooo_max_bytes", "ooo_max_packets", "ooo_arrivals")
INT_METRICS += ("retransmitted_packets",)
INT_METRICS += ("duplicate_packets", "reinjected_bytes", "unmapped_bytes", "rcvbuf_k_max_bytes")
# The block workload (traffic tool blocks), after the capture's; null for the other tools.
BLOCK_METRICS: tuple[str, ...] = ("block_delay_p50_s", "block_delay_p95_s", "block_delay_p99_s")
BLOCK_METRICS += ("block_delay_max_s", "blocks_missing")
INT_COLUMNS = (*INT_METRICS, *SENDER_COUNTERS, "blocks_missing", *apps_part.INT_COLUMNS)
# Per-path columns `<m>.<path>`; wire_bps counts IP length plus the Ethernet header.
PATH_METRICS: tuple[str, ...] = ("link_util", "throughput_bps", "wire_bps", *SS_PATH_METRICS)
PATH_METRICS += latency_part.PATH_METRICS  # the latency probe's RTT quantiles and loss
SERIES_COLUMNS = {"time": "float64", "t": "float64", "source": "string", "metric": "string"}
SERIES_COLUMNS |= {"path": "string", "subflow": "string", "value": "float64"}


@dataclass(frozen=True)
class Options:
    """How metrics are computed (recorded in metrics.json; a change re-analyses)."""

    k_block: int = 100  # K: packets per block for the receive-buffer metric
    bin_s: float = 0.1  # bin width of goodput and throughput series, seconds

    def __post_init__(self) -> None:
        from collectors.analyze import check_options

        check_options(self.k_block, self.bin_s)


@dataclass
class RunOutcome:
    """One run's row and what happened while collecting it."""

    run_id: str
    row: dict[str, Any]  # the runs.parquet row
    problems: list[str] = field(default_factory=list)  # "<run>/<file>: message"
    reused: bool = False  # metrics.json was current: nothing re-analysed


@dataclass
class CampaignOutcome:
    """A collected campaign."""

    root: Path
    runs: list[RunOutcome]
    parquet: Path

    @property
    def problems(self) -> list[str]:
        return [p for r in self.runs for p in r.problems]


Progress = Callable[[int, int, RunOutcome], None]


def campaign_dirs(results: Path) -> list[Path]:
    """RESULTS is one campaign's directory, or a directory of campaign directories."""
    if not results.is_dir():
        raise UsageError(f"{results}: not a directory; give results/<campaign> or results/")
    if _is_campaign(results):
        return [results]
    found = sorted(p for p in results.iterdir() if p.is_dir() and _is_campaign(p))
    if not found:
        raise UsageError(f"{results}: no run bundles (no */run.json); run `mprig run` first")
    return found


def _is_campaign(path: Path) -> bool:
    return (path / bundles.CAMPAIGN_JSON).is_file() or any(bundle_dirs(path))


def bundle_dirs(root: Path) -> Iterable[Path]:
    """Run bundles of a campaign directory (staging and replaced ones are skipped)."""
    for p in sorted(root.iterdir()):
        if p.is_dir() and not p.name.startswith(".") and (p / bundles.RUN_JSON).exists():
            yield p


def collect_campaign(
    root: Path, options: Options, *, force: bool = False, progress: Progress | None = None
) -> CampaignOutcome:
    """Collect every bundle of one campaign and write its runs.parquet (holding the
    campaign directory's writer lock)."""
    with fsio.results_lock(root, "mprig collect"):
        return _collect_campaign(root, options, force=force, progress=progress)


def duplicate_bundles(dirs: list[Path]) -> list[str]:
    """`A and B are the same run (...)` for bundles with one run id or one recorded set of
    artifacts: a copied bundle would otherwise be counted twice."""
    seen: dict[tuple[str, str], Path] = {}
    found = []
    for directory in dirs:
        for key in _identity(directory):
            if key in seen:
                found.append(f"{seen[key]} and {directory} are the same run ({key[0]} {key[1]})")
                break
            seen[key] = directory
    return found


def _identity(directory: Path) -> list[tuple[str, str]]:
    try:
        record = bundles.read_record(directory)
    except ValueError:
        return []  # reported as corrupt on its own
    keys = [("run id", str(record.get("run_id") or directory.name))]
    artifacts = record.get("artifacts")
    if isinstance(artifacts, dict) and artifacts:
        digest = hashlib.sha256(json.dumps(artifacts, sort_keys=True).encode()).hexdigest()
        keys.append(("artifacts sha256", digest[:16]))
    return keys


def check_duplicates(dirs: list[Path]) -> None:
    """UsageError naming both paths of every duplicated bundle."""
    found = duplicate_bundles(dirs)
    if found:
        raise UsageError("duplicate run bundles: " + "; ".join(found) + "; remove the copies")


def _collect_campaign(
    root: Path, options: Options, *, force: bool, progress: Progress | None
) -> CampaignOutcome:
    dirs = list(bundle_dirs(root))
    check_duplicates(dirs)
    outcomes, plan = [], bundles.read_planned(root)
    for i, directory in enumerate(dirs, start=1):
        outcome = collect_run(directory, options, force=force, plan=plan)
        outcomes.append(outcome)
        if progress is not None:
            progress(i, len(dirs), outcome)
    parquet = root / RUNS_PARQUET
    write_parquet(runs_frame([o.row for o in outcomes]), parquet)
    return CampaignOutcome(root, outcomes, parquet)


def collect_run(
    directory: Path, options: Options, *, force: bool = False, plan: bundles.Planned | None = None
) -> RunOutcome:
    """One bundle -> its runs.parquet row (metrics.json and timeseries.parquet written for
    a complete run); corrupt when its run.json disagrees with itself or PLAN."""
    try:
        info = RunInfo(directory, bundles.read_record(directory))
    except ValueError as e:
        row = {"run_id": directory.name, "campaign": directory.parent.name, "status": "corrupt"}
        message = str(e).replace(str(directory / bundles.RUN_JSON), bundles.RUN_JSON)
        return RunOutcome(directory.name, row, [f"{directory.name}/{message}"])
    if info.status != "complete":
        return RunOutcome(info.run_id, id_row(info))
    if why := bundles.record_problem(directory.name, info.record, plan):
        return _corrupt(RunInfo(directory, {**info.record, "run_id": directory.name}), why)
    try:
        hashes = content_hashes(directory)
    except OSError as e:
        return _corrupt(info, fsio.io_message(Path(e.filename or directory), e, "cannot read"))
    problem = artifact_problem(info.record.get("artifacts"), hashes)
    if problem is not None:
        return _corrupt(info, problem)
    inputs = _inputs(hashes, options)
    if not force and (cached := collect_cache.cached(directory, inputs, FORMAT)) is not None:
        return RunOutcome(info.run_id, cached["row"], list(cached.get("problems", [])), True)
    return _analyse(info, options, inputs)


def _corrupt(info: RunInfo, problem: str) -> RunOutcome:
    """A complete run whose files cannot be trusted: status corrupt, no metrics."""
    row = id_row(info) | {"status": "corrupt"}
    return RunOutcome(info.run_id, row, [f"{info.run_id}: corrupt, excluded: {problem}"])


def content_hashes(bundle: Path) -> dict[str, str]:
    """sha256 of every file of a bundle but collect's own outputs (run.json included)."""
    return {
        p.name: bundles.sha256_file(p)
        for p in sorted(bundle.iterdir())
        if p.is_file() and not p.name.startswith(".") and p.name not in (METRICS_JSON, TIMESERIES)
    }


def artifact_problem(artifacts: Any, hashes: dict[str, str]) -> str | None:
    """What is wrong between run.json's `artifacts` and the files' hashes, or None."""
    if not isinstance(artifacts, dict) or not artifacts:
        return "run.json lists no artifacts"
    for name, digest in artifacts.items():
        if name not in hashes:
            return f"artifact {name} is missing"
        if hashes[name] != digest:
            return f"artifact {name}: sha256 differs from run.json"
    return None


def _inputs(hashes: dict[str, str], options: Options) -> dict[str, Any]:
    """What a metrics.json was made from: options and the sha256 of every file (a file
    changed after the run is analysed again, whatever its size and mtime)."""
    return {"collector": COLLECTOR_VERSION, "k_block": options.k_block,
            "bin_s": options.bin_s, "sha256": hashes}  # fmt: skip


def _analyse(info: RunInfo, options: Options, inputs: dict[str, Any]) -> RunOutcome:
    problems: list[str] = []
    parts = {
        "capture": capture_part.capture_part(info, options.k_block, options.bin_s),
        "iperf3": runparts.iperf3_part(info),
        "ss": runparts.ss_part(info),
        "nstat": runparts.nstat_part(info),
        "blocks": runparts.blocks_part(info) if info.tool == "blocks" else runparts.Part(),
        "apps": apps_part.apps_part(info),
        "latency": latency_part.latency_part(info),
    }
    parts["cross"] = cross_part(info, parts["iperf3"].metrics.get("iperf3_bps"))
    problems += [p for part in parts.values() for p in part.problems]
    doc = metrics_doc(info, parts, inputs)
    doc["problems"] = [f"{info.run_id}/{p}" for p in problems]
    doc = _clean(doc)
    series = timeseries_frame(info, [s for part in parts.values() for s in part.series])
    collect_cache.write(info.bundle, doc, lambda path: write_parquet(series, path))
    return RunOutcome(info.run_id, doc["row"], doc["problems"])


def id_row(info: RunInfo) -> dict[str, Any]:
    """The identifying columns and sweep parameters of a run (metrics left out: null)."""
    rec = info.record
    row: dict[str, Any] = {
        "campaign": rec.get("campaign") or info.bundle.parent.name,
        "run_id": info.run_id,
        "variant": info.variant.get("name"),
        "protocol": info.variant.get("protocol"),
        "status": info.status,
    }
    for key in INT_ID_COLUMNS:
        row[key] = rec.get(key) if isinstance(rec.get(key), int) else None
    point = rec.get("point")
    point = point if isinstance(point, dict) else {}
    row |= {f"param.{axis}": value for axis, value in point.items()}
    return row


def metrics_doc(
    info: RunInfo, parts: dict[str, runparts.Part], inputs: dict[str, Any]
) -> dict[str, Any]:
    """metrics.json: the runs.parquet row plus the detail behind it."""
    cap, ss_p = parts["capture"].metrics, parts["ss"].metrics
    nstat = parts["nstat"].metrics.get("nstat", {})
    row = id_row(info)
    row |= {m: cap.get(m) for m in FLOAT_METRICS + INT_METRICS}
    row |= sender_counters(nstat.get(info.sender))
    row["iperf3_bps"] = parts["iperf3"].metrics.get("iperf3_bps")
    row |= {m: parts["blocks"].metrics.get(m) for m in BLOCK_METRICS}
    row |= {m: parts["apps"].metrics.get(m) for m in apps_part.COLUMNS}
    row["ss_acked_bps"] = ss_acked(ss_p.get("paths", {}))
    row |= parts["cross"].metrics.get("columns", {})  # competing flows (collectors/cross.py)
    throughput, source = _path_throughput(info, cap, ss_p.get("paths", {}))
    row |= path_columns(info, throughput, ss_p.get("paths", {}), cap.get("path_wire_bps"))
    row |= parts["latency"].metrics.get("columns", {})
    return {
        "format": FORMAT,
        "run_id": info.run_id,
        "inputs": inputs,
        "row": row,
        "connection": cap.get("connection"),
        "subflows": cap.get("subflows"),
        "capture_warnings": cap.get("warnings", []),
        "capture_partial": cap.get("partial"),
        "path_throughput_source": source,
        "ss_paths": ss_p.get("paths", {}),
        "iperf3": parts["iperf3"].metrics.get("iperf3", {}),
        "bulk": parts["iperf3"].metrics.get("bulk"),
        "blocks": parts["blocks"].metrics.get("blocks"),
        "apps": parts["apps"].metrics.get("apps"),
        "latency": parts["latency"].metrics.get("latency"),
        "nstat": nstat,
        **kernel_ofo(cap.get("receiver_ooo"), nstat.get(info.receiver, {})),
    }


def ss_acked(ss_paths: dict[str, dict[str, float | None]]) -> float | None:
    """The sender's ss acknowledged-bytes rate summed over paths (a throughput cross-check)."""
    rates = [v.get("acked_bps") for v in ss_paths.values()]
    known = [float(r) for r in rates if r is not None]
    return sum(known) if known else None


def _path_throughput(
    info: RunInfo, capture: dict[str, Any], ss_paths: dict[str, dict[str, float | None]]
) -> tuple[dict[str, float] | None, str | None]:
    """Per-path throughput from the receiver's capture (MPTCP and plain TCP alike); for a
    plain TCP run without a usable capture, the sender's acknowledged-bytes rate from ss."""
    if capture.get("path_throughput_bps") is not None:
        return capture["path_throughput_bps"], "capture"
    if not info.mptcp:
        acked = {p: float(v["acked_bps"] or 0.0) for p, v in ss_paths.items() if v.get("acked_bps")}
        return (acked, "ss") if acked else (None, None)
    return None, None


def path_columns(
    info: RunInfo,
    throughput: dict[str, float] | None,
    ss_paths: dict[str, dict[str, float | None]],
    wire: dict[str, float] | None = None,
) -> dict[str, float | None]:
    """`link_util.<path>`, `throughput_bps.<path>`, `wire_bps.<path>` and the ss columns
    (SS_PATH_METRICS) for every configured path (null where there is no data)."""
    rates = info.path_rates_bps()
    names = list(rates) + sorted(set(throughput or {}) - set(rates))
    out: dict[str, float | None] = {}
    for path in names:
        tput = (throughput or {}).get(path) if throughput is not None else None
        rate = rates.get(path)
        out[f"link_util.{path}"] = tput / rate if tput is not None and rate else None
        out[f"throughput_bps.{path}"] = tput
        out[f"wire_bps.{path}"] = (wire or {}).get(path) if tput is not None else None
        out |= {f"{m}.{path}": ss_paths.get(path, {}).get(m) for m in SS_PATH_METRICS}
    return out


def kernel_ofo(ours: dict[str, int] | None, receiver: dict[str, int]) -> dict[str, Any]:
    """Our out-of-order count (skbs, every connection towards the receiver) against the
    receiver kernel's MPTcpExtOFOQueue delta (docs/metrics.md, "Kernel cross-check")."""
    kernel = receiver.get("MPTcpExtOFOQueue")
    skbs = (ours or {}).get("ooo_skbs")
    ratio = skbs / kernel if skbs is not None and kernel else None
    ours = ours or {}
    detail = {k: ours.get(k) for k in ("ooo_packets", "ooo_skbs")} | {"MPTcpExtOFOQueue": kernel}
    return {"kernel_ofo_ratio": ratio, "kernel_ofo": detail}


def timeseries_frame(info: RunInfo, pieces: list[pd.DataFrame]) -> pd.DataFrame:
    """The run's long time-series table (SERIES_COLUMNS); `t` is seconds since the run's
    recorded start (or its first sample)."""
    import pandas as pd

    columns = {c: t for c, t in SERIES_COLUMNS.items() if c != "t"}
    typed = [p.reindex(columns=list(columns)).astype(columns) for p in pieces if len(p)]
    frame = pd.concat(typed, ignore_index=True) if typed else pd.DataFrame(columns=list(columns))
    start = info.start_time()
    if start is None and len(frame):
        start = float(frame["time"].min())
    frame["t"] = frame["time"].astype("float64") - (start or 0.0)
    frame = frame[list(SERIES_COLUMNS)].astype(SERIES_COLUMNS)
    return frame.sort_values(["source", "metric", "time"], kind="stable", ignore_index=True)


def runs_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """runs.parquet: one row per run, the columns of docs/bundle.md in their order."""
    import pandas as pd

    columns = list(ID_COLUMNS + INT_ID_COLUMNS)
    columns += sorted({c for r in rows for c in r if c.startswith("param.")})
    columns += [*FLOAT_METRICS, *INT_METRICS, *SENDER_COUNTERS, *BLOCK_METRICS, *apps_part.COLUMNS]
    for metric in PATH_METRICS:
        columns += sorted({c for r in rows for c in r if c.startswith(f"{metric}.")})
    columns += cross_columns(rows)
    frame = pd.DataFrame({c: [r.get(c) for r in rows] for c in columns})
    return frame.astype(_dtypes(frame))


def _dtypes(frame: pd.DataFrame) -> dict[str, str]:
    out = {}
    for c in frame.columns:
        if c in ID_COLUMNS:
            out[c] = "string"
        elif c in INT_ID_COLUMNS or c in INT_COLUMNS:
            out[c] = "Int64"
        elif c.startswith("param."):
            out[c] = _param_dtype(frame[c])
        else:
            out[c] = "float64"
    return out


def _param_dtype(values: pd.Series) -> str:
    present = [v for v in values if v is not None]
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in present)
    return "float64" if numeric else "string"


def write_parquet(frame: pd.DataFrame, path: Path) -> None:
    """Write a parquet file atomically (temporary file, fsync, rename)."""
    fsio.write_with(path, lambda tmp: frame.to_parquet(tmp, index=False))


def _clean(value: Any) -> Any:
    """JSON-safe: NaN becomes null, numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
