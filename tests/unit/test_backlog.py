"""`mprig backlog PAPER` (reports/backlog.py): the runs a paper's full profile needs before
every cell holds K, read from the real plans and the archives, and the run, collect and
archive steps that add them, stopping when the time is out."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import paper_synth as ps
import pytest

from mprig.cli.main import main
from reports import archive, backlog


def shape(found: list[backlog.Need]) -> list[tuple[str, str, int, int]]:
    return [(n.name, n.shard, n.fewest, len(n.todo)) for n in found]


@pytest.mark.parametrize(
    ("paper", "expected"),
    [
        ("000", [("000-table1-full", "1/6", 0, 60), ("000-scenario1-full", "1/6", 0, 450),
                 ("000-scenario2-full", "1/6", 0, 450)]),
        ("004", [("004-fig4-full", "1/1", 0, 315), ("004-fig6a-full", "1/1", 0, 210),
                 ("004-fig6b-full", "1/1", 0, 100), ("004-fig6c-full", "1/1", 0, 60),
                 ("004-fig7-full", "1/1", 0, 15)]),
    ],
)  # fmt: skip
def test_shard_1_of_repetitions_over_k_is_the_backlog_of_an_empty_archive(
    tmp_path: Path, paper: str, expected: list[tuple[str, str, int, int]]
) -> None:
    """000 plans 30 repetitions: shard 1/6 is 5 of each of its cells (60 = 12 cells x 5);
    004 plans 5: the whole campaign."""
    assert shape(backlog.needs(paper, 5, tmp_path)) == expected


def test_a_k_above_the_planned_repetitions_is_refused_with_the_file(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"004-fig4-full.yaml: plans 5 repetitions .*at most 5"):
        backlog.needs("004", 6, tmp_path)


def archived(tmp_path: Path, stem: str, dropped: int = 0, limited: int = 0) -> list[str]:
    """Archive synthetic results of experiments/papers/STEM.yaml (its real plan) into
    tmp_path/archives/STEM, DROPPED runs never run and LIMITED runs rig-limited, each of
    another cell (sorted run ids go cell by cell, 5 repetitions each); the ids of both."""
    src = ps.write(tmp_path / "results" / stem, stem)
    ids = sorted(pd.read_parquet(src / "runs.parquet")["run_id"])
    gone, slow = ids[1::5][:dropped], ids[::-5][:limited]
    rows = pd.read_parquet(src / "runs.parquet")
    rows[~rows["run_id"].isin(gone)].to_parquet(src / "runs.parquet")
    for run_id in slow:
        record = json.loads((src / run_id / "run.json").read_text())
        cpu = {"rig_limited": True, "cause": "other work took 22 % of the host's CPUs"}
        record.update(flags=["rig_limited"], rig_cpu=cpu)
        (src / run_id / "run.json").write_text(json.dumps(record))
        ps._collected(src / run_id)
    archive.archive(src, tmp_path / "archives" / stem)
    return [*gone, *slow]


def test_the_backlog_is_what_the_archive_lacks_or_holds_rig_limited(tmp_path: Path) -> None:
    left = archived(tmp_path, "004-fig6c-full", dropped=3, limited=2)
    archived(tmp_path, "004-fig7-full")
    found = {n.name: n for n in backlog.needs("004", 5, tmp_path / "archives")}
    assert sorted(found["004-fig6c-full"].todo) == sorted(left)
    assert found["004-fig6c-full"].fewest == 4
    assert (found["004-fig7-full"].fewest, found["004-fig7-full"].todo) == (5, ())
    text = backlog.lines("004", 5, list(found.values()))
    assert "004-fig7-full: the fewest complete runs of a cell: 5: done" in text
    assert text[3].startswith("004-fig6c-full: the fewest complete runs of a cell: 4, shard 1/1:"
                              " 5 runs to go, about 0.1 h")  # fmt: skip
    assert text[-1].startswith("paper 004: 4 of 5 campaigns short of n = 5: 630 runs, about")
    assert backlog.lines("004", 4, [found["004-fig6c-full"]])[-1] == (
        "paper 004: every cell holds 4 runs or more"
    )


def need(tmp_path: Path, name: str, todo: int = 2) -> backlog.Need:
    spec = tmp_path / f"{name}.yaml"
    ids = tuple(f"{name}-r{i}" for i in range(todo))
    return backlog.Need(name, spec, "1/6", 0, ids, run_seconds=50.0)


class Calls:
    """A stand-in for `mprig ARGS` that records them and answers `run` from a list."""

    def __init__(self, run_status: list[int], collect_status: int = 0) -> None:
        self.seen: list[list[str]] = []
        self.run_status, self.collect_status = run_status, collect_status

    def __call__(self, args: list[str]) -> int:
        self.seen.append(args)
        if args[0] == "run":
            return self.run_status.pop(0)
        return self.collect_status if args[0] == "collect" else 0


def test_each_short_campaign_is_run_collected_and_archived(tmp_path: Path) -> None:
    archives, results = tmp_path / "archives", tmp_path / "results"
    (archives / "b").mkdir(parents=True)
    (archives / "b" / "campaign.json").write_text("{}")  # b has an archive, a has none
    done = backlog.Need("done", tmp_path / "done.yaml", "1/6", 5, (), 50.0)
    calls = Calls([0, 0])
    found = [need(tmp_path, "a"), done, need(tmp_path, "b")]
    assert backlog.run(found, 5, 7200, archives, results, calls, say=lambda _: None) == 0
    shard = str(results / "shard-1-of-6")
    first, second = calls.seen[0], calls.seen[3]
    assert first[:6] == ["run", str(tmp_path / "a.yaml"), "--shard", "1/6",
                         "--redo-rig-limited", "--results"]  # fmt: skip
    assert first[6] == shard and "--skip-archived" not in first
    assert second[second.index("--skip-archived") + 1] == str(archives / "b")
    assert float(first[first.index("--stop-after") + 1].removesuffix("s")) == pytest.approx(
        7200, abs=5
    )
    assert calls.seen[1:3] == [["collect", f"{shard}/a"], ["archive", f"{shard}/a",
                                                           str(archives / "a")]]  # fmt: skip
    assert len(calls.seen) == 6  # "done" never ran


@pytest.mark.parametrize(
    ("run_status", "collect_status", "expected", "calls_made"),
    [
        ([3, 0], 0, 3, 3),  # stopped by --stop-after: archived, the next campaign waits
        ([1, 0], 0, 1, 6),  # runs failed: archived what completed, went on
        # artifact problems (their metrics null, the runs listed): archived, went on
        ([0, 0], 1, 1, 6),
        ([3, 0], 1, 3, 3),  # artifact problems, then the stop: archived, the next waits
        ([0, 0], 2, 2, 2),  # could not collect: nothing archived, stopped with its status
    ],
)
def test_a_stop_a_failure_and_a_failed_collect(
    tmp_path: Path, run_status: list[int], collect_status: int, expected: int, calls_made: int
) -> None:
    calls = Calls(run_status, collect_status)
    found = [need(tmp_path, "a"), need(tmp_path, "b")]
    got = backlog.run(found, 5, None, tmp_path, tmp_path, calls, say=lambda _: None)
    assert (got, len(calls.seen)) == (expected, calls_made)
    assert all("--stop-after" not in c for c in calls.seen)


def test_artifact_problems_are_archived_and_said(tmp_path: Path) -> None:
    """`mprig collect` exits 1 when it wrote every table but some artifacts had problems
    (7 damaged iperf3-server.json of 004 Fig. 6(b)): the shard is archived all the same."""
    calls, said = Calls([0], collect_status=1), []
    got = backlog.run([need(tmp_path, "a")], 5, None, tmp_path, tmp_path, calls, said.append)
    assert (got, [c[0] for c in calls.seen]) == (1, ["run", "collect", "archive"])
    assert said[-1] == ("mprig: a: collect found artifact problems (listed above; those"
                        " metrics are null); archived all the same")  # fmt: skip


def test_no_time_for_a_run_starts_none(tmp_path: Path) -> None:
    calls, said = Calls([]), []
    got = backlog.run([need(tmp_path, "a")], 5, 30, tmp_path, tmp_path, calls, said.append)
    assert (got, calls.seen) == (3, [])
    assert said == ["mprig: a: no time left for a run; the next call goes on"]


def test_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 004 as if its full reproduction were not committed (the repository's is): empty
    # archives leave every campaign short
    committed = backlog.committed_full
    monkeypatch.setattr(backlog, "committed_full", lambda p, *a: p != "004" and committed(p))
    assert main(["backlog", "004", "--archives", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("004-fig4-full: the fewest complete runs of a cell: 0, shard 1/1:")
    assert out[-1].startswith("paper 004: 5 of 5 campaigns short of n = 5: 700 runs")
    assert main(["backlog", "001"]) == 0  # committed: reports/reproductions/001 is full
    assert capsys.readouterr().out == (
        "paper 001: reports/reproductions/001 is a full reproduction of every planned run;"
        " nothing to run\n"
    )
    assert main(["backlog", "009"]) == 2
    assert "unknown paper '009'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["backlog", "004", "--min-n", "0"])
    assert "allowed: 1 to 1000 (runs per cell)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["backlog", "--help"])
    assert "make paper-full PAPER=000 STOP_AFTER=8h" in capsys.readouterr().out


def test_docs_papers_md_says_what_the_archives_leave() -> None:
    """docs/papers.md's table of what each paper's full profile still needs comes from the
    committed archives and plans (`make papers-docs`, run by every `make paper-shard`)."""
    from reports.paperplans import ROOT

    text = (ROOT / "docs" / "papers.md").read_text()
    start, end = text.index(backlog.DOCS_BEGIN), text.index(backlog.DOCS_END)
    assert text[start : end + len(backlog.DOCS_END)] == backlog.docs_section()


def test_a_committed_full_reproduction_of_every_run_leaves_nothing_to_do(tmp_path: Path) -> None:
    for paper, env in [("001", {"profile": "full"}), ("002", {"profile": "core"}),
                       ("003", {"profile": "full", "incomplete": ["x"]})]:  # fmt: skip
        (tmp_path / paper).mkdir()
        (tmp_path / paper / "environment.json").write_text(json.dumps(env))
    assert [backlog.committed_full(p, tmp_path) for p in ("000", "001", "002", "003")] == [
        False, True, False, False]  # fmt: skip
    rows = backlog.docs_section(5, tmp_path / "none", tmp_path).splitlines()
    assert "| 001 | committed (reports/reproductions/001), every planned run | 0 | – |" in rows
    assert any(
        r.startswith("| 002 | 0 of 2 campaigns done; to go: 002-case-a-full 10") for r in rows
    )
