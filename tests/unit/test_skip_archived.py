"""`mprig run --skip-archived ARCHIVE`: a full profile resumes on a fresh machine from the
runs committed in an `mprig archive`; only an archive of the same campaign, spec and plan
is used, and only its intact runs are skipped. The VM boot is replaced by a recorder: what
reaches the guest's `mprig run` is its command line and campaign.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_merge import SPEC, plan
from test_merge import shard_dir as merge_shard_dir

from mprig.cli.main import main
from mprig.rig import vm
from reports import archive


def shard_dir(root: Path, index: int, count: int, text: str = SPEC) -> tuple[Path, list[Any]]:
    """test_merge's shard directory, each run with a capture of its own."""
    return merge_shard_dir(root, index, count, text, own_capture=True)


def collected(results: Path, runs: list[Any]) -> Path:
    """What `mprig collect` leaves for these runs: runs.parquet rows and metrics.json."""
    rows = [{"campaign": "mc", "run_id": r.run_id, "variant": r.variant.name,
             "protocol": r.variant.protocol, "status": "complete", "index": r.index,
             "repetition": r.repetition, "seed": r.seed, "throughput_bps": 1e6}
            for r in runs]  # fmt: skip
    pd.DataFrame(rows).to_parquet(results / "runs.parquet")
    for r in runs:
        from mprig.run.bundle import sha256_file

        inputs = {"sha256": {"run.json": sha256_file(results / r.run_id / "run.json")}}
        (results / r.run_id / "metrics.json").write_text(json.dumps({"inputs": inputs}))
    return results


@pytest.fixture
def booted(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The guest command lines `mprig run --vm` would have booted."""
    seen: list[list[str]] = []

    def record(argv: list[str], rwdirs: list[Path], **_: Any) -> int:
        seen.append(argv)
        return 0

    monkeypatch.setattr(vm, "run_in_vm", record)
    monkeypatch.setenv("MPRIG_VNG", "/usr/bin/vng")
    return seen


def run(tmp_path: Path, *extra: str) -> int:
    spec = tmp_path / "mc.yaml"
    spec.write_text(SPEC)
    return main(["run", str(spec), "--vm", "--quiet", "--results", str(tmp_path / "r"), *extra])


def test_the_archived_runs_are_left_out_here_and_in_the_guest(
    tmp_path: Path, booted: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    shard, mine = shard_dir(tmp_path, 1, 2)
    dest = tmp_path / "archived" / "mc"
    archive.archive(collected(shard, mine), dest)
    assert run(tmp_path, "--skip-archived", str(dest)) == 0
    (argv,) = booted
    assert argv[argv.index("--skip-archived") + 1] == str(dest.resolve())
    doc = json.loads((tmp_path / "r" / "mc" / "campaign.json").read_text())
    held = sorted(r.run_id for r in mine)
    assert sorted(doc["archived_elsewhere"]) == held
    capsys.readouterr()
    assert main(["status", str(tmp_path / "r" / "mc"), "--json"]) == 1
    left = [r["run_id"] for r in json.loads(capsys.readouterr().out)]
    assert sorted(left) == sorted({r.run_id for r in plan()[1]} - set(held))


def test_a_shard_wholly_archived_runs_nothing(
    tmp_path: Path, booted: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    shard, mine = shard_dir(tmp_path, 2, 2)
    dest = tmp_path / "archived" / "mc"
    archive.archive(collected(shard, mine), dest)
    assert run(tmp_path, "--shard", "2/2", "--skip-archived", str(dest)) == 0
    assert booted == []
    assert "every planned run of shard 2/2 is archived" in capsys.readouterr().err


def test_an_edited_archived_run_is_run_again(tmp_path: Path, booted: list[list[str]]) -> None:
    shard, mine = shard_dir(tmp_path, 1, 2)
    dest = tmp_path / "archived" / "mc"
    archive.archive(collected(shard, mine), dest)
    edited = mine[0].run_id
    record = json.loads((dest / edited / "run.json").read_text())
    (dest / edited / "run.json").write_text(json.dumps({**record, "summary": {}}))
    assert run(tmp_path, "--shard", "1/2", "--skip-archived", str(dest)) == 0
    doc = json.loads((tmp_path / "r" / "mc" / "campaign.json").read_text())
    assert doc["shard"]["run_ids"] == [edited]
    assert doc["archived_elsewhere"] == [r.run_id for r in mine[1:]]


@pytest.mark.parametrize("what", ["another spec", "not an archive", "nothing there"])
def test_an_archive_of_something_else_is_refused_before_anything_runs(
    tmp_path: Path, booted: list[list[str]], capsys: pytest.CaptureFixture[str], what: str
) -> None:
    text = SPEC.replace("repetitions: 2", "repetitions: 2\nseed: 7")
    shard, mine = shard_dir(tmp_path, 1, 2, text if what == "another spec" else SPEC)
    if what == "another spec":
        dest = tmp_path / "archived" / "mc"
        archive.archive(collected(shard, mine), dest)
        expected = "spec sha256"
    elif what == "not an archive":
        dest, expected = shard, "not an archive (no baseline.json)"
    else:
        dest, expected = tmp_path / "nowhere", "not a campaign results directory"
    assert run(tmp_path, "--skip-archived", str(dest)) == 2
    assert expected in capsys.readouterr().err
    assert booted == [] and not (tmp_path / "r").exists()


@pytest.mark.parametrize("redo", [False, True])
def test_redo_rig_limited_runs_the_archived_rig_limited_runs_again(
    tmp_path: Path, booted: list[list[str]], capsys: pytest.CaptureFixture[str], redo: bool
) -> None:
    """Reports leave a rig-limited run out, so the archive's cell is short until a clean
    rerun replaces it: --redo-rig-limited must reach archived rig-limited runs too (and the
    guest must be told so), while without it every archived run stays skipped."""
    from mprig.run import bundle

    shard, mine = shard_dir(tmp_path, 1, 2)
    limited = mine[0].run_id
    cpu = {"rig_limited": True, "cause": "other work took 22 % of the host's CPUs"}
    record = {"run_id": limited, "status": "complete", "summary": {"throughput_bps": 1e6},
              "flags": ["rig_limited"], "rig_cpu": cpu}  # fmt: skip
    shutil.rmtree(shard / limited)
    staging = bundle.partial_dir(shard, limited)
    staging.mkdir(parents=True)
    (staging / "client.pcap").write_bytes(limited.encode())
    bundle.commit(shard, limited, record)
    dest = tmp_path / "archived" / "mc"
    archive.archive(collected(shard, mine), dest)
    extra = ["--redo-rig-limited"] if redo else []
    assert run(tmp_path, "--shard", "1/2", "--skip-archived", str(dest), *extra) == 0
    if not redo:
        assert booted == [] and "every planned run of shard 1/2 is archived" in (
            capsys.readouterr().err
        )
        return
    (argv,) = booted
    assert "--redo-rig-limited" in argv and "--skip-archived" in argv
    doc = json.loads((tmp_path / "r" / "mc" / "campaign.json").read_text())
    assert doc["shard"]["run_ids"] == [limited]
    assert doc["archived_elsewhere"] == [r.run_id for r in mine[1:]]
    err = capsys.readouterr().err
    assert f"{len(mine) - 1} planned runs of shard 1/2 are archived" in err
    assert "1 archived rig-limited run is run again (--redo-rig-limited)" in err


def test_the_archive_check_reads_only_the_bundles_the_archive_has(
    tmp_path: Path, booted: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One directory listing, then a look at each archived bundle of the runs asked about:
    not one per planned run (in the campaign VM each look crosses 9p; 60 s for a 2700-run
    plan)."""
    from mprig.run import bundle

    shard, mine = shard_dir(tmp_path, 1, 2)
    dest = tmp_path / "archived" / "mc"
    archive.archive(collected(shard, mine), dest)
    looked: list[str] = []
    real = bundle.verify

    def verify(path: Path, kept: dict[str, str] | None = None) -> bundle.Verdict:
        if kept is not None:  # a look into the archive
            looked.append(path.name)
        return real(path, kept)

    monkeypatch.setattr(bundle, "verify", verify)
    assert run(tmp_path, "--skip-archived", str(dest)) == 0
    assert sorted(looked) == sorted(r.run_id for r in mine)  # the plan has twice as many
    looked.clear()
    assert run(tmp_path, "--shard", "2/2", "--skip-archived", str(dest)) == 0
    assert looked == []  # none of shard 2's runs is in the archive
