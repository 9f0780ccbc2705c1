"""collect's cache: a bundle's metrics.json and timeseries.parquet, reused only as collect
wrote them.

metrics.json records what it was made from (`inputs`: options and every file's sha256), the
sha256 of the timeseries.parquet written with it (`outputs`) and its own digest (`sha256`,
of its canonical JSON without that key). A metrics.json or time series edited after collect
wrote them no longer verifies, and the run is analysed again: the cache can be lost, never
passed on as the run's result. One written by an earlier mprig (no digest) is redone once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mprig import fsio
from mprig.run import bundle as bundles

METRICS_JSON = "metrics.json"
TIMESERIES = "timeseries.parquet"
DIGEST = "sha256"


def digest(doc: dict[str, Any]) -> str:
    """sha256 of DOC's canonical JSON, without its own DIGEST key."""
    body = {k: v for k, v in doc.items() if k != DIGEST}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def write(bundle: Path, doc: dict[str, Any], write_series: Callable[[Path], None]) -> None:
    """Write the time series (WRITE_SERIES to its path), then metrics.json sealed with the
    series' sha256 and its own digest."""
    write_series(bundle / TIMESERIES)
    doc["outputs"] = {TIMESERIES: bundles.sha256_file(bundle / TIMESERIES)}
    doc[DIGEST] = digest(doc)
    fsio.write_json(bundle / METRICS_JSON, doc)


def cached(bundle: Path, inputs: dict[str, Any], fmt: int) -> dict[str, Any] | None:
    """BUNDLE's metrics.json when it is the one collect wrote from INPUTS (format FMT) and
    its time series is the one written with it; None otherwise (analyse again)."""
    try:
        doc = json.loads((bundle / METRICS_JSON).read_text())
        if not isinstance(doc, dict) or doc.get(DIGEST) != digest(doc):
            return None
        outputs = doc.get("outputs")
        series = outputs.get(TIMESERIES) if isinstance(outputs, dict) else None
        if series is None or series != bundles.sha256_file(bundle / TIMESERIES):
            return None
    except (OSError, ValueError):
        return None
    return doc if doc.get("format") == fmt and doc.get("inputs") == inputs else None
