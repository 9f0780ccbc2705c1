"""Run bundles whose run the campaign's plan does not name (status "unplanned"): runs of an
earlier spec or plan left in a results directory, or copied in. Seen for real: 004's Fig.
6(b) was rescaled (its rates divided by 10 again) and run into the same results directory,
which still held 10 runs at the old rates (29-72 Mbit/s against 1-10 now) under other run
ids; `mprig collect` took every bundle and `mprig archive` would have added them to the new
campaign's archive. Reports never average them in, archives leave them out and say why,
and `mprig run` names them before it starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import report_synth as synth
from test_skip_archived import booted, run  # noqa: F401 (booted: a fixture used by name)

from mprig.cli.main import main
from reports import archive
from reports import results as res

STALE = 4  # the first runs of the synthetic plan, left out of the edited plan


def replanned(root: Path) -> tuple[Path, list[str]]:
    """Synthetic results whose campaign.json no longer plans the first STALE runs: the
    plan of an edited spec, with the earlier spec's bundles still in the directory."""
    src = synth.write(root / "synth")
    doc = json.loads((src / "campaign.json").read_text())
    stale = [p["run_id"] for p in doc["plan"][:STALE]]
    doc["plan"] = doc["plan"][STALE:]
    (src / "campaign.json").write_text(json.dumps(doc))
    return src, stale


def test_reports_leave_unplanned_runs_out_and_say_why(tmp_path: Path) -> None:
    src, stale = replanned(tmp_path)
    loaded = res.load(src)
    unplanned = loaded.runs.loc[loaded.runs["status"] == "unplanned", "run_id"]
    assert sorted(unplanned) == sorted(stale)
    assert not loaded.complete["run_id"].isin(stale).any()
    assert len(loaded.complete) == len(loaded.planned) == len(loaded.runs) - STALE
    reasons = loaded.failed.set_index("run_id")["reason"]
    assert all(reasons[r] == res.UNPLANNED for r in stale)


def test_an_archive_leaves_unplanned_runs_out_and_names_them(tmp_path: Path) -> None:
    src, stale = replanned(tmp_path)
    done = archive.archive(src, tmp_path / "archive" / "synth")
    assert sorted(done.left_out) == sorted(stale) and not set(done.added) & set(stale)
    assert all("not in campaign.json's plan" in why for why in done.left_out.values())
    assert done.archived == done.planned == len(res.load(src).runs) - STALE
    assert not any((tmp_path / "archive" / "synth" / r).exists() for r in stale)


def test_an_empty_plan_marks_nothing_unplanned(tmp_path: Path) -> None:
    # campaign.json without a plan (written by hand, or by an old mprig): no run is judged
    src = synth.write(tmp_path / "synth")
    doc = json.loads((src / "campaign.json").read_text())
    (src / "campaign.json").write_text(json.dumps({**doc, "plan": []}))
    assert set(res.load(src).runs["status"]) == {"complete"}


@pytest.mark.usefixtures("booted")  # the VM boot replaced by a recorder
def test_run_names_the_bundles_its_plan_does_not_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "r" / "mc"
    for name in ("old-run-1", "old-run-2"):
        (results / name).mkdir(parents=True)
        (results / name / "run.json").write_text("{}")
    (results / "not-a-bundle").mkdir()
    assert run(tmp_path) == 0  # --quiet: nothing said
    assert "plan" not in capsys.readouterr().err
    spec = tmp_path / "mc.yaml"
    assert main(["run", str(spec), "--vm", "--results", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert "2 run bundle(s) not in this campaign's plan" in err and "e.g. old-run-1" in err
