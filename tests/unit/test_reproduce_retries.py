"""A reproduction says which cells hold runs that needed a second attempt. At 100 m in
003-scenario1-full, 4 of 17 attempts hung (iperf3 past its timeout on a 38 % loss link) and
the runner kept the attempt that finished (run.json `attempts: 2`): those cells are a sample
of the attempts that did not hang, which a reader must be told. metrics keep each run's
`attempts`; report.md counts the retried runs per point; a committed reproduction judged
again from its own files writes the same report.md."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import paper_synth as ps
import pytest

from reports import reproduce
from reports.reproduce_rig import reason_lines, retry_lines
from reports.results import point_label

# what the runner records when it kills iperf3 as hung (two runs: ports differ) and when an
# SSH connection drops
HUNG = "client: `mptcpize run iperf3 -c 10.0.0.1 -p {port} -t 50 -J` exited -9: (no stderr)"
LOST = "server: ssh: connection to server lost (exit 255)"
REASONS = {3: [HUNG.format(port=5201)], 7: [HUNG.format(port=5207), LOST]}


def _reproduce(
    tmp: Path, attempts: dict[int, int], reasons: dict[int, list[str]] | None = None
) -> Path:
    results = tmp / "results"
    ps.write(results / "000-table1-full", "000-table1-full", repetitions=5, attempts=attempts,
             reasons=reasons)  # fmt: skip
    out = tmp / "reproductions"
    reproduce.reproduce("000", "full", results, out, run=False, partial=True)
    return out / "000"


def _points(tmp: Path) -> dict[int, dict[str, object]]:
    """Run index -> its point, from the campaign ps.write planned."""
    import json

    plan = json.loads((tmp / "results" / "000-table1-full" / "campaign.json").read_text())
    return {r["index"]: r["point"] for r in plan["plan"]}


@pytest.fixture(scope="module")
def retried(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _reproduce(tmp_path_factory.mktemp("retried"), {3: 2, 7: 3}, REASONS)


def test_each_runs_attempts_is_a_column_of_the_metrics(retried: Path) -> None:
    metrics = pd.read_parquet(retried / "metrics.parquet")
    by_index = dict(zip(metrics["index"], metrics["attempts"], strict=True))
    assert by_index[3] == 2 and by_index[7] == 3
    assert sum(a > 1 for a in by_index.values()) == 2
    assert pd.read_csv(retried / "metrics.csv")["attempts"].tolist() == metrics["attempts"].tolist()


def test_the_report_counts_the_retried_runs_per_point(retried: Path) -> None:
    text = (retried / "report.md").read_text()
    section = text.split("## 000-table1-full", 1)[1].split("\n## ", 1)[0]
    assert "2 of its 60 complete runs needed more than one attempt" in section, section[:800]
    points = _points(retried.parent.parent)
    for label in {point_label(points[i]) for i in (3, 7)}:
        runs = sum(point_label(p) == label for p in points.values())
        retried_here = sum(point_label(points[i]) == label for i in (3, 7))
        assert f"{label}: {retried_here} of {runs}" in section, section[:800]
    assert "only the attempts that finished" in section


def test_the_report_says_why_the_discarded_attempts_ended(retried: Path) -> None:
    """Reasons that differ only in their numbers (a port, a run's time) are one kind,
    quoted once with its count, the most frequent first."""
    text = (retried / "report.md").read_text()
    section = text.split("## 000-table1-full", 1)[1].split("\n## ", 1)[0]
    why = "The discarded attempts ended so (run.json `earlier_attempts`): "
    hung = f"`` {HUNG.format(port=5201)} ``"  # the reason has backticks of its own
    assert f"{why}2 × {hung}; 1 × `{LOST}`." in section, section[:1200]


def test_each_runs_reasons_are_a_column_of_the_metrics(retried: Path) -> None:
    """metrics' `retry_reasons`: the JSON list of a run's discarded attempts' reasons, empty
    for a run that needed one attempt (a reproduction judged again reads it back)."""
    metrics = pd.read_csv(retried / "metrics.csv", keep_default_na=False)
    got = dict(zip(metrics["index"], metrics["retry_reasons"], strict=True))
    assert [json.loads(got[i]) for i in (3, 7)] == [REASONS[3], REASONS[7]]
    assert {v for i, v in got.items() if i not in (3, 7)} == {""}


def test_a_long_reason_is_cut_in_the_report() -> None:
    [line] = reason_lines(["x" * 500, "x" * 500])
    assert "2 × `" + "x" * 157 + "...`" in line and len(line) < 260
    [line] = reason_lines(["a", "b", "c", "d"])  # four kinds: three quoted, one counted
    assert line.endswith("1 × `a`; 1 × `b`; 1 × `c`; 1 more kind (each run.json).")


def test_no_retry_adds_no_line(tmp_path: Path) -> None:
    assert "attempt" not in (_reproduce(tmp_path, {}) / "report.md").read_text()


def test_retry_lines_group_by_point_in_the_points_order() -> None:
    """Points sorted by value (100 m after 20 m), each with its retried and complete runs."""

    class Fake:
        def __init__(self, bundles: dict[str, dict[str, object]]) -> None:
            self.bundles = bundles
            self.complete = pd.DataFrame({"run_id": list(bundles)})

    near, far = {"paths.wifi1.distance_m": 20}, {"paths.wifi1.distance_m": 100}
    bundles = {
        "a": {"point": far, "attempts": 2},
        "b": {"point": near, "attempts": 2},
        "c": {"point": far},
        "d": {"point": near, "attempts": 1},
        "e": {"point": far, "attempts": 3},
    }
    line = retry_lines(Fake(bundles))[0]  # type: ignore[arg-type]
    assert "3 of its 5 complete runs" in line
    assert line.index("wifi1.distance_m=20: 1 of 2") < line.index("wifi1.distance_m=100: 2 of 3")


def test_judged_again_from_its_own_files_the_report_is_the_same(
    retried: Path, tmp_path: Path
) -> None:
    before, after = ps.rejudged(retried, tmp_path)
    assert "needed more than one attempt" in before
    assert after == before
