"""Paper 004 Fig. 7 in a reproduction report: the per-block delay table (reports/
reproduce_delay.py) from results of the shipped 004-fig7 campaign, with delays a model
chooses per variant, so the table's numbers can be checked against the model's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import paper_synth as ps

from mprig.campaign.plan import Run
from reports import reproduce
from reports.reproduce_delay import delay_rows
from reports.results import load

# p50 per variant in seconds; p95, p99 and max are 2x, 3x and 4x it.
P50 = {"mptcp": 0.080, "tcp_wifi": 0.200, "tcp_cell": 0.900}


def blocks(run: Run, rng: np.random.Generator) -> dict[str, float]:
    base = P50[run.variant.name] * (1 + 0.01 * rng.standard_normal())
    quantiles = {"p50": base, "p95": 2 * base, "p99": 3 * base, "max": 4 * base}
    return {**ps.healthy(run, rng), **{f"block_delay_{k}_s": v for k, v in quantiles.items()}}


def _mean(cell: str) -> float:
    return float(cell.split(" [")[0].replace("\u202f", ""))


def test_each_variants_quantiles_are_its_runs_means_in_ms(tmp_path: Path) -> None:
    rows = delay_rows(load(ps.write(tmp_path / "fig7", "004-fig7-core", blocks)))
    assert [(r["variant"], r["runs"]) for r in rows] == [(v, "5") for v in P50]
    for row in rows:
        p50 = P50[row["variant"]] * 1000
        got = [_mean(row[f"{q} ms"]) for q in ("p50", "p95", "p99", "max")]
        assert np.allclose(got, [p50, 2 * p50, 3 * p50, 4 * p50], rtol=0.02), row
        low, high = (
            float(x.replace("\u202f", "")) for x in row["p50 ms"][:-1].split(" [")[1].split(", ")
        )
        assert low < _mean(row["p50 ms"]) < high


def test_runs_without_blocks_make_no_table(tmp_path: Path) -> None:
    assert delay_rows(load(ps.write(tmp_path / "fig4", "004-fig4-core"))) == []


def test_the_paper_004_core_report_has_the_fig7_delay_table(tmp_path: Path) -> None:
    results = tmp_path / "results"
    ps.write(results / "004-fig7-core", "004-fig7-core", blocks)
    report = reproduce.reproduce("004", "core", results, tmp_path / "out", run=False, partial=True)
    text = report.read_text()
    section = text.split("## 004-fig7-core")[1].split("\n## ")[0]
    assert "### Per-block application delay" in section
    row = next(line for line in section.splitlines() if line.startswith("| tcp_cell | 5 | "))
    assert abs(_mean(row.split(" | ")[2]) - 900) < 18, row
