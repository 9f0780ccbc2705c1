"""Bundles: staging and rename, verification, resume decisions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mprig.run import bundle

SHA_HELLO = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"


def stage(results: Path, run_id: str, files: dict[str, bytes]) -> Path:
    d = bundle.partial_dir(results, run_id)
    d.mkdir(parents=True)
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


def test_commit_writes_run_json_and_renames(tmp_path: Path) -> None:
    stage(tmp_path, "r1", {"client.pcap": b"hello"})
    final = bundle.commit(tmp_path, "r1", {"run_id": "r1", "status": "complete"})
    assert final == tmp_path / "r1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r1"]
    doc = json.loads((final / "run.json").read_text())
    assert doc == {
        "run_id": "r1",
        "status": "complete",
        "format": 1,
        "artifacts": {"client.pcap": SHA_HELLO},
    }
    assert bundle.verify(final) == bundle.Verdict(True, "complete", "complete")
    assert bundle.decide(tmp_path, "r1", force=False) == bundle.Decision("skip", "complete")
    assert bundle.decide(tmp_path, "r1", force=True) == bundle.Decision("run", "force")


def test_commit_replaces_a_failed_bundle(tmp_path: Path) -> None:
    stage(tmp_path, "r1", {"a.txt": b"1"})
    bundle.commit(tmp_path, "r1", {"status": "failed", "reason": "client: ssh timeout"})
    assert bundle.decide(tmp_path, "r1", force=False) == bundle.Decision(
        "run", "failed: client: ssh timeout"
    )
    stage(tmp_path, "r1", {"b.txt": b"2"})
    bundle.commit(tmp_path, "r1", {"status": "complete"})
    assert sorted(p.name for p in (tmp_path / "r1").iterdir()) == ["b.txt", "run.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r1"]


def test_tampered_artifact_is_redone(tmp_path: Path) -> None:
    stage(tmp_path, "r1", {"client.pcap": b"hello", "ss-server.txt": b"# 1.0\n"})
    final = bundle.commit(tmp_path, "r1", {"status": "complete"})
    (final / "client.pcap").write_bytes(b"hellO")
    assert bundle.decide(tmp_path, "r1", force=False) == bundle.Decision(
        "run", "artifact client.pcap: sha256 differs from run.json"
    )
    (final / "client.pcap").unlink()
    assert bundle.verify(final) == bundle.Verdict(
        False, "artifact client.pcap is missing", "corrupt"
    )


def test_files_added_by_collect_are_allowed(tmp_path: Path) -> None:
    stage(tmp_path, "r1", {"client.pcap": b"hello"})
    final = bundle.commit(tmp_path, "r1", {"status": "complete"})
    (final / "metrics.json").write_text("{}")
    assert bundle.verify(final).ok


def test_partial_and_missing(tmp_path: Path) -> None:
    assert bundle.decide(tmp_path, "r1", force=False) == bundle.Decision("run", "missing")
    stage(tmp_path, "r1", {"client.pcap": b"x"})
    assert bundle.decide(tmp_path, "r1", force=False) == bundle.Decision("run", "partial")
    (tmp_path / ".r2.old").mkdir()
    (tmp_path / "keep").mkdir()
    assert bundle.clean_leftovers(tmp_path) == [".r1.partial", ".r2.old"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]


def test_newer_format_and_junk_are_rejected(tmp_path: Path) -> None:
    d = tmp_path / "r1"
    d.mkdir()
    (d / "run.json").write_text('{"format": 2, "status": "complete"}')
    v = bundle.verify(d)
    assert (v.ok, v.status) == (False, "corrupt")
    assert v.reason.endswith("run.json: format 2 is newer than 1; upgrade")
    (d / "run.json").write_text("[1, 2")
    assert bundle.verify(d).status == "corrupt"


def test_write_json_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "campaign.json"
    bundle.write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["campaign.json"]


@pytest.mark.parametrize("status", ["failed", "interrupted"])
def test_unfinished_statuses_are_redone(tmp_path: Path, status: str) -> None:
    stage(tmp_path, "r1", {"x": b""})
    bundle.commit(tmp_path, "r1", {"status": status, "reason": "SIGTERM"})
    assert bundle.decide(tmp_path, "r1", force=False) == bundle.Decision(
        "run", f"{status}: SIGTERM"
    )


def test_rig_limited_runs_are_redone_only_when_asked(tmp_path: Path) -> None:
    """A complete run whose rig was saturated (run.json rig_cpu.rig_limited) is kept on a
    plain resume and redone with redo_rig_limited; a healthy run is kept either way."""
    stage(tmp_path, "busy", {"client.pcap": b"hello"})
    limited = {"rig_limited": True, "cause": "other work took 35% of the host's CPUs"}
    bundle.commit(tmp_path, "busy", {"status": "complete", "rig_cpu": limited})
    stage(tmp_path, "calm", {"client.pcap": b"hello"})
    bundle.commit(tmp_path, "calm", {"status": "complete", "rig_cpu": {"rig_limited": False}})
    keep = bundle.Decision("skip", "complete")
    assert bundle.decide(tmp_path, "busy", force=False) == keep
    assert bundle.decide(tmp_path, "busy", force=False, redo_rig_limited=True) == bundle.Decision(
        "run", "rig-limited: other work took 35% of the host's CPUs"
    )
    assert bundle.decide(tmp_path, "calm", force=False, redo_rig_limited=True) == keep


def test_a_rig_limited_run_to_redo_is_not_hashed_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its bundle goes whatever its hashes say: a campaign VM's shard spent 147 s hashing the
    29 rig-limited bundles it was about to redo (16-70 MB each over 9p)."""
    stage(tmp_path, "busy", {"client.pcap": b"hello"})
    bundle.commit(tmp_path, "busy", {"status": "complete", "rig_cpu": {"rig_limited": True}})
    (tmp_path / "busy" / "client.pcap").write_bytes(b"tampered")

    def no_hashing(path: Path) -> str:
        raise AssertionError(f"hashed {path}")

    monkeypatch.setattr(bundle, "sha256_file", no_hashing)
    assert bundle.decide(tmp_path, "busy", force=False, redo_rig_limited=True) == bundle.Decision(
        "run", "rig-limited: CPU saturated during the traffic"
    )


def test_an_ns3_run_that_fell_behind_real_time_is_redone_as_rig_limited(tmp_path: Path) -> None:
    """Reports leave out a run whose ns-3 link engine lagged (flag not_realtime) as
    rig-limited; --redo-rig-limited must redo it too, with the same cause."""
    stage(tmp_path, "lagged", {"client.pcap": b"hello"})
    engine = {"lag_p95_ms": 9, "lag_max_ms": 80, "limits": {"lag_p95_ms": 5, "lag_max_ms": 50}}
    record = {"status": "complete", "flags": ["not_realtime"], "engine": engine}
    bundle.commit(tmp_path, "lagged", record)
    assert bundle.decide(tmp_path, "lagged", force=False) == bundle.Decision("skip", "complete")
    why = "rig-limited: not real-time: ns-3 lag p95 9 ms, max 80 ms (limits 5 ms, 50 ms)"
    assert bundle.decide(tmp_path, "lagged", force=False, redo_rig_limited=True) == (
        bundle.Decision("run", why)
    )
