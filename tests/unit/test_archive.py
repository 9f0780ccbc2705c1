"""`mprig archive` (reports/archive.py): a campaign's complete runs kept without their
captures, accumulated shard by shard, read back by the reports as results, tamper-evident,
and never half-written."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import report_synth as synth

from mprig.cli.main import main
from mprig.errors import UsageError
from reports import archive
from reports import results as res

RUNS = [synth.run_id(v, d, r) for v in ("nopr", "dsack") for d in (10.0, 50.0) for r in range(1, 6)]
HALF = RUNS[::2]
OTHER = [r for r in RUNS if r not in HALF]
SPEC = """\
name: synth
paths:
  - {name: wifi, kind: wifi, rate_mbit: 20, delay_ms: 10, limit_pkts: 100}
variants:
  - {name: tcp, protocol: tcp, path: wifi}
traffic: {tool: iperf3, direction: download, duration_s: 1}
"""


def shard(root: Path, missing: list[str], **kw: object) -> Path:
    """A synthetic results directory holding every planned run but MISSING."""
    return synth.write(root / "synth", synth.Synth(dropped=tuple(missing), **kw))  # type: ignore[arg-type]


def metrics(root: Path) -> pd.DataFrame:
    runs = res.load(root).runs.set_index("run_id").sort_index()
    return runs[["status", "throughput_bps", "goodput_bps", "ooo_ratio"]]


def test_an_archive_reads_back_as_the_results_it_came_from(tmp_path: Path) -> None:
    src = synth.write(tmp_path / "r" / "synth")
    dest = tmp_path / "archive" / "synth"
    done = archive.archive(src, dest)
    assert (done.archived, done.planned, len(done.added)) == (20, 20, 20)
    pd.testing.assert_frame_equal(metrics(dest), metrics(src))
    kept = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert kept == sorted(["baseline.json", "campaign.json", "runs.parquet"]
                          + [f"{r}/run.json" for r in RUNS])  # fmt: skip


def test_shards_accumulate_and_overlap_keeps_the_archived_record(tmp_path: Path) -> None:
    dest = tmp_path / "archive"
    first = archive.archive(shard(tmp_path / "a", OTHER), dest)
    assert (first.archived, sorted(first.added)) == (10, sorted(HALF))
    assert res.load(dest).complete["run_id"].nunique() == 10
    # the second shard's results also hold two runs the archive has, measured again
    again = HALF[:2]
    rerun = shard(tmp_path / "b", [r for r in HALF if r not in again], noise=7)
    for run_id in again:
        record = json.loads((rerun / run_id / "run.json").read_text())
        (rerun / run_id / "run.json").write_text(json.dumps({**record, "attempts": 2}))
    second = archive.archive(rerun, dest)
    assert sorted(second.added) == sorted(OTHER) and sorted(second.kept) == sorted(again)
    assert second.archived == 20
    whole = metrics(dest)
    assert (whole["status"] == "complete").all() and len(whole) == 20
    first_values = metrics(tmp_path / "a" / "synth")
    for run_id in again:  # the archived record stays; the rerun is not swapped in
        assert whole.loc[run_id, "throughput_bps"] == first_values.loc[run_id, "throughput_bps"]
        assert json.loads((dest / run_id / "run.json").read_text())["attempts"] == 1
    doc = json.loads((dest / "campaign.json").read_text())
    assert [s["shard"] for s in doc["archived_from"]] == ["whole plan", "whole plan"]


def test_failed_and_corrupt_runs_are_left_out_and_named(tmp_path: Path) -> None:
    bad, failed = RUNS[3], RUNS[7]
    src = synth.write(tmp_path / "r" / "synth", synth.Synth(failed=(failed,)))
    (src / bad / "iperf3-client.json").write_text("edited after the run")
    done = archive.archive(src, tmp_path / "archive")
    assert done.archived == 18
    assert set(done.left_out) == {bad, failed}
    assert "sha256" in done.left_out[bad] and "failed" in done.left_out[failed]
    assert not (tmp_path / "archive" / bad).exists()


def test_an_edited_archive_is_caught(tmp_path: Path) -> None:
    dest = tmp_path / "archive"
    archive.archive(synth.write(tmp_path / "r" / "synth"), dest)
    record = json.loads((dest / RUNS[0] / "run.json").read_text())
    record["seed"] = 1
    (dest / RUNS[0] / "run.json").write_text(json.dumps(record))
    assert metrics(dest).loc[RUNS[0], "status"] == "corrupt"
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    with pytest.raises(UsageError, match=f"archived run {RUNS[0]} is corrupt"):
        archive.archive(synth.write(tmp_path / "s" / "synth"), dest)  # no new manifest over it
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    rows = pd.read_parquet(dest / "runs.parquet")
    rows.loc[0, "throughput_bps"] *= 2
    rows.to_parquet(dest / "runs.parquet")
    with pytest.raises(UsageError, match=r"runs\.parquet: sha256 differs"):
        res.load(dest)
    with pytest.raises(UsageError, match=r"runs\.parquet: sha256 differs"):
        archive.archive(tmp_path / "s" / "synth", dest)  # never added to


def test_another_campaign_is_refused_and_the_archive_left_as_it_was(tmp_path: Path) -> None:
    dest = tmp_path / "archive"
    archive.archive(shard(tmp_path / "a", OTHER), dest)
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    other = synth.write(tmp_path / "b" / "synth", synth.Synth(seed=9))
    with pytest.raises(UsageError, match="spec sha256") as e:
        archive.archive(other, dest)
    assert "archive them into a directory of their own" in str(e.value)
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before


def test_results_not_collected_are_refused_with_what_to_do(tmp_path: Path) -> None:
    src = synth.write(tmp_path / "r" / "synth")
    (src / "runs.parquet").unlink()
    with pytest.raises(UsageError, match="run `mprig collect"):
        archive.archive(src, tmp_path / "archive")
    assert not (tmp_path / "archive").exists()


def test_a_crash_while_writing_leaves_the_old_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "archive"
    archive.archive(shard(tmp_path / "a", OTHER), dest)
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    calls = {"n": 0}
    real = archive.fsio.write_bytes

    def fail_later(path: Path, data: bytes) -> Path:
        calls["n"] += 1
        if calls["n"] == 5:
            raise OSError(28, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(archive.fsio, "write_bytes", fail_later)
    with pytest.raises(OSError):
        archive.archive(shard(tmp_path / "b", HALF), dest)
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "archive", "b"]


def test_a_crash_between_the_renames_is_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "archive"
    archive.archive(shard(tmp_path / "a", OTHER), dest)
    real = os.rename

    def crash_on_second(src: str | Path, dst: str | Path) -> None:
        if Path(dst) == dest:
            raise KeyboardInterrupt  # killed after DEST was moved aside
        real(src, dst)

    monkeypatch.setattr(archive.os, "rename", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        archive.archive(shard(tmp_path / "b", HALF), dest)
    monkeypatch.setattr(archive.os, "rename", real)
    assert not dest.exists()
    done = archive.archive(shard(tmp_path / "b", HALF), dest)  # the next call restores first
    assert (done.archived, len(done.kept), len(done.added)) == (20, 0, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "archive", "b"]


def test_cli_reports_what_it_archived_and_reports_read_the_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report of an archive goes to results/archived-reports/, not into the archive
    (a committed directory that keeps only what its manifest lists)."""
    src = shard(tmp_path / "r", [RUNS[0]])
    dest = tmp_path / "archive" / "synth"
    assert main(["archive", str(src), str(dest)]) == 0
    out = capsys.readouterr().out
    assert f"{dest}: 19 of 20 planned runs archived (19 added now, 0 already there)" in out
    before = sorted(p.relative_to(dest) for p in dest.rglob("*"))
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(dest), "--format", "md"]) == 0
    assert sorted(p.relative_to(dest) for p in dest.rglob("*")) == before
    md = (tmp_path / "results" / "archived-reports" / "synth" / "report.md").read_text()
    assert RUNS[0] in md  # the run never archived is shown as missing
    assert main(["archive", str(tmp_path / "nowhere"), str(dest)]) == 2
    assert "campaign.json: not found" in capsys.readouterr().err


def test_status_collect_and_run_know_an_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "archived" / "synth"
    archive.archive(shard(tmp_path / "r", [RUNS[0]]), dest)
    assert main(["status", str(dest), "--json"]) == 1  # one planned run never archived
    rows = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert (rows[RUNS[0]]["status"], rows[RUNS[0]]["reason"]) == ("missing", "not archived yet")
    assert rows[RUNS[1]]["status"] == "complete"
    assert rows[RUNS[1]]["reason"] == ""
    record = json.loads((dest / RUNS[1] / "run.json").read_text())
    (dest / RUNS[1] / "run.json").write_text(json.dumps({**record, "seed": 5}))
    main(["status", str(dest), "--json"])
    row = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}[RUNS[1]]
    assert row["status"] == "corrupt" and "sha256 differs from baseline.json" in row["reason"]
    (dest / RUNS[1] / "run.json").write_text(json.dumps(record))

    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    assert main(["collect", str(dest.parent)]) == 0  # a results root holding archives
    assert "an archive (`mprig archive`) is collected once" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before

    spec = tmp_path / "synth.yaml"  # any campaign named synth: refused before it is read
    spec.write_text(SPEC)
    assert main(["run", str(spec), "--results", str(dest.parent), "--no-vm"]) == 2
    assert "is an archive" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before


def _keep_only(src: Path, dst: Path, run_ids: set[str]) -> Path:
    """A copy of SRC holding only RUN_IDS: what one shard's results hold."""
    shutil.copytree(src, dst)
    rows = pd.read_parquet(dst / "runs.parquet")
    for run_id in set(rows["run_id"]) - run_ids:
        shutil.rmtree(dst / run_id)
    rows[rows["run_id"].isin(run_ids)].to_parquet(dst / "runs.parquet")
    return dst


def test_a_reproduction_from_archives_is_the_one_from_the_results(tmp_path: Path) -> None:
    """Paper 004's campaigns (synthetic runs of the real plans), each archived, one of them
    from two shards: `mprig reproduce --results ARCHIVES` judges exactly what it judges from
    the results themselves."""
    import paper_synth as ps

    from reports import paperplans, reproduce

    results, archived = tmp_path / "results", tmp_path / "archived"
    for stem in paperplans.PAPERS["004"].campaigns:
        src = ps.write(results / f"{stem}-full", f"{stem}-full", repetitions=1)
        ids = sorted(pd.read_parquet(src / "runs.parquet")["run_id"])
        if stem == "004-fig4":
            for i, part in enumerate((set(ids[::2]), set(ids[1::2]))):
                archive.archive(_keep_only(src, tmp_path / f"shard{i}", part), archived / src.name)
        else:
            archive.archive(src, archived / src.name)
    mine = reproduce.reproduce("004", "full", results, tmp_path / "a", run=False)
    kept = reproduce.reproduce("004", "full", archived, tmp_path / "b", run=False)
    assert json.loads((kept.parent / "verdicts.json").read_text()) == json.loads(
        (mine.parent / "verdicts.json").read_text()
    )

    def frame(root: Path) -> pd.DataFrame:
        rows = pd.read_parquet(root / "metrics.parquet")
        return rows.sort_values("run_id").reset_index(drop=True)[sorted(rows.columns)]

    pd.testing.assert_frame_equal(frame(kept.parent), frame(mine.parent))
    assert kept.read_text() == mine.read_text().replace(str(results), str(archived))


def test_a_run_redone_or_never_collected_is_not_archived(tmp_path: Path) -> None:
    """runs.parquet is collect's view at the time: a run redone since (a new run.json) or
    never collected would be archived with another run's metrics."""
    src = synth.write(tmp_path / "r" / "synth")
    redone, fresh = RUNS[2], RUNS[5]
    record = json.loads((src / redone / "run.json").read_text())
    (src / redone / "run.json").write_text(json.dumps({**record, "attempts": 2}))
    (src / fresh / "metrics.json").unlink()
    done = archive.archive(src, tmp_path / "archive")
    assert done.archived == 18
    assert "redone after it was collected: run `mprig collect` again" in done.left_out[redone]
    assert "run `mprig collect` on the results first" in done.left_out[fresh]


def test_a_partial_archive_says_not_archived_yet_and_how_to_add(tmp_path: Path) -> None:
    """Runs an archive does not hold may have run on a machine whose results were never
    archived: the gap says "not archived yet" (not "never ran") and points at paper-shard."""
    import paper_synth as ps

    from reports import paperplans, reproduce

    results, archived = tmp_path / "results", tmp_path / "archived"
    for stem in paperplans.PAPERS["004"].campaigns:
        src = ps.write(results / f"{stem}-full", f"{stem}-full", repetitions=1)
        ids = sorted(pd.read_parquet(src / "runs.parquet")["run_id"])
        keep = set(ids[::3]) if stem == "004-fig4" else set(ids)
        archive.archive(_keep_only(src, tmp_path / f"s-{stem}", keep), archived / src.name)
    fig4 = sorted(pd.read_parquet(results / "004-fig4-full" / "runs.parquet")["run_id"])
    left = len(fig4) - len(fig4[::3])
    gap = f"004-fig4-full: {left} of {len(fig4)} planned runs not archived yet"
    with pytest.raises(UsageError) as refused:
        reproduce.reproduce("004", "full", archived, tmp_path / "out", run=False)
    assert gap in str(refused.value) and "make paper-shard" in str(refused.value)
    assert "never ran" not in str(refused.value) and not (tmp_path / "out" / "004").exists()
    text = reproduce.reproduce(
        "004", "full", archived, tmp_path / "out", run=False, partial=True
    ).read_text()
    assert gap in text and f"; {left} planned runs not archived yet" in text
    assert "never ran" not in text


@pytest.mark.parametrize("how", ["cpu", "not_realtime"])
def test_a_clean_rerun_replaces_an_archived_rig_limited_run_and_nothing_else(
    tmp_path: Path, how: str
) -> None:
    """An archived rig-limited run measured the rig, and reports leave it out: the archive
    must take a clean rerun of it (`mprig run --redo-rig-limited`), or the cell stays short
    forever. A complete archived run is never swapped, and a rerun limited again changes
    nothing."""
    victim, limited_again = RUNS[1], RUNS[6]
    dest = tmp_path / "archive"
    first = synth.Synth(rig_limited={victim: how, limited_again: how})
    archive.archive(synth.write(tmp_path / "a" / "synth", first), dest)
    assert metrics(dest).loc[[victim, limited_again], "status"].tolist() == ["rig-limited"] * 2
    rerun = synth.write(
        tmp_path / "b" / "synth", synth.Synth(noise=7, rig_limited={limited_again: "cpu"})
    )
    done = archive.archive(rerun, dest)
    assert (done.replaced, done.added, done.archived) == ([victim], [], 20)
    assert sorted(done.kept) == sorted(r for r in RUNS if r != victim)
    whole, fresh, old = metrics(dest), metrics(rerun), metrics(tmp_path / "a" / "synth")
    assert whole.loc[victim, "status"] == "complete"
    assert whole.loc[victim, "throughput_bps"] == fresh.loc[victim, "throughput_bps"]
    assert json.loads((dest / victim / "run.json").read_text()).get("rig_cpu") is None
    assert whole.loc[limited_again, "status"] == "rig-limited"
    others = [r for r in RUNS if r not in (victim, limited_again)]
    pd.testing.assert_series_equal(
        whole.loc[others, "throughput_bps"], old.loc[others, "throughput_bps"]
    )
    assert archive.summary(done)[0].endswith(
        "20 of 20 planned runs archived (0 added now, 1 rig-limited run replaced by a clean"
        " rerun, 19 already there)"
    )
