"""`mprig archive --prune` (reports/archive.py prune): once a shard's runs are archived,
their bundles (captures and logs, 64-71 MB a run at 10-40 m in the campaign VM) leave the results
directory, which stays a results directory. Only a bundle whose run.json the intact archive
holds byte for byte goes; a crash part way leaves results that read and a second call that
finishes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_archive import RUNS, shard
from test_backlog import Calls, need

from mprig.cli.main import main
from mprig.errors import UsageError
from mprig.run import bundle
from reports import archive, backlog
from reports import results as res


def archived(tmp_path: Path, missing: list[str]) -> tuple[Path, Path]:
    """A shard's collected results without MISSING, archived: (results, archive)."""
    src = shard(tmp_path / "r", missing)
    dest = tmp_path / "archive" / "synth"
    archive.archive(src, dest)
    return src, dest


def files(root: Path) -> dict[Path, bytes]:
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_the_archived_bundles_leave_and_the_results_still_read(tmp_path: Path) -> None:
    src, dest = archived(tmp_path, [RUNS[0]])
    redone = RUNS[1]  # measured again after it was archived: not the archived record
    record = json.loads((src / redone / "run.json").read_text())
    (src / redone / "run.json").write_text(json.dumps({**record, "attempts": 2}))
    size = sum(len(b) for p, b in files(src).items() if p.parts[0] not in (redone,))
    kept = files(dest)

    done = archive.prune(src, dest)

    assert sorted(done.removed) == sorted(set(RUNS) - {RUNS[0], redone})
    assert not [r for r in done.removed if (src / r).exists()]
    assert (src / redone / "run.json").is_file()  # its bundle stays, captures and all
    assert 0 < done.freed < size
    assert files(dest) == kept  # the archive is not touched
    doc = json.loads((src / "campaign.json").read_text())
    assert sorted(doc["archived_elsewhere"]) == sorted(done.removed)
    left = res.load(src)  # still results: no corrupt run, no row without its bundle
    assert left.corrupt == {}
    assert set(left.runs["run_id"].astype(str)) == {redone}
    assert not [p for p in src.iterdir() if p.name.startswith(".") and p.is_dir()]


def test_status_and_a_second_archive_agree_with_the_pruned_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dest = archived(tmp_path, [RUNS[0]])
    archive.prune(src, dest)
    main(["status", str(src), "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in rows] == [RUNS[0]]  # only the run no archive holds
    main(["status", str(src)])
    assert "19 more planned runs are archived elsewhere" in capsys.readouterr().out
    before = files(dest)
    again = archive.archive(src, dest)  # the next shard's call: nothing lost, nothing named
    assert (again.archived, again.added, again.left_out) == (19, [], {})
    assert files(dest) == before  # nothing new: the archive is left byte for byte
    assert archive.prune(src, dest).removed == []


def test_a_corrupt_archive_prunes_nothing(tmp_path: Path) -> None:
    src, dest = archived(tmp_path, [])
    record = json.loads((dest / RUNS[2] / "run.json").read_text())
    (dest / RUNS[2] / "run.json").write_text(json.dumps({**record, "seed": 9}))
    before = files(src)
    with pytest.raises(UsageError, match=f"archived run {RUNS[2]} is corrupt"):
        archive.prune(src, dest)
    assert files(src) == before


def test_a_crash_while_removing_leaves_results_that_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the first bundle was renamed out of sight: the rows and campaign.json
    already say archived elsewhere, the renamed bundle is what `mprig run` clears, and a
    second call removes the rest."""
    src, dest = archived(tmp_path, [])
    real = archive.shutil.rmtree

    def killed(path: Path, *a: object, **k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(archive.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        archive.prune(src, dest)
    monkeypatch.setattr(archive.shutil, "rmtree", real)
    assert res.load(src).corrupt == {}
    assert len(bundle.clean_leftovers(src)) == 1
    second = archive.prune(src, dest)
    assert len(second.removed) == len(RUNS) - 1
    assert not [p for p in src.iterdir() if p.is_dir()]
    assert res.load(src).runs.empty


def test_the_cli_says_what_it_freed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = shard(tmp_path / "r", [RUNS[0]])
    dest = tmp_path / "archive" / "synth"
    assert main(["archive", "--prune", str(src), str(dest)]) == 0
    out = capsys.readouterr().out
    assert "19 of 20 planned runs archived" in out
    assert f"{src}: 19 archived runs' bundles removed" in out and "GB freed" in out
    assert main(["archive", "--prune", str(src), str(dest)]) == 0
    assert "nothing to prune" in capsys.readouterr().out


@pytest.mark.parametrize("prune", [False, True])
def test_backlog_prunes_only_when_asked(tmp_path: Path, prune: bool) -> None:
    calls = Calls([0])
    backlog.run([need(tmp_path, "a")], 5, None, tmp_path, tmp_path, calls, lambda _: None, prune)
    archived_call = next(c for c in calls.seen if c[0] == "archive")
    assert ("--prune" in archived_call) is prune
