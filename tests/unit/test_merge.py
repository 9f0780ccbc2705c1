"""`mprig merge`: shards' results directories joined into one (mprig/run/merge.py). Bundles are
real ones (bundle.commit over staged files), campaign.json is the one `mprig run --shard`
writes; the merged directory is judged by `mprig status`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mprig import fsio
from mprig.campaign.plan import Run, expand
from mprig.campaign.shard import Shard, select
from mprig.campaign.spec import parse_campaign
from mprig.cli.cmd_run import write_campaign_json
from mprig.cli.main import main
from mprig.run import bundle, merge

SPEC = """\
name: mc
paths:
  - {name: wifi, kind: wifi, rate_mbit: 20, delay_ms: 10}
  - {name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40}
variants:
  - {name: mptcp}
  - {name: tcp_cell, protocol: tcp, path: cell}
repetitions: 2
"""


def plan(text: str = SPEC) -> tuple[object, list[Run]]:
    campaign = parse_campaign(text, "mc.yaml")
    return campaign, expand(campaign)


def put_bundle(results: Path, run: Run, payload: bytes = b"pcap bytes") -> Path:
    staging = bundle.partial_dir(results, run.run_id)
    staging.mkdir(parents=True)
    (staging / "client.pcap").write_bytes(payload)
    record = {"run_id": run.run_id, "status": "complete", "summary": {"throughput_bps": 1e6}}
    return bundle.commit(results, run.run_id, record)


def shard_dir(
    root: Path, index: int, count: int, text: str = SPEC, own_capture: bool = False
) -> tuple[Path, list[Run]]:
    """A shard's results directory with a complete bundle for each of its runs (with
    OWN_CAPTURE, each run's capture its own bytes, as reports' duplicate check wants)."""
    campaign, runs = plan(text)
    mine = select(runs, Shard(index, count))
    results = root / f"shard{index}" / "mc"
    results.mkdir(parents=True)
    write_campaign_json(results, "mc.yaml", campaign, runs, shard=(Shard(index, count), mine))
    for run in mine:
        put_bundle(results, run, run.run_id.encode() if own_capture else b"pcap bytes")
    return results, mine


def status(results: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["status", str(results), "--json"])
    return code, [r["status"] for r in json.loads(capsys.readouterr().out)]


def test_two_shards_merge_into_one_complete_campaign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, runs_a = shard_dir(tmp_path, 1, 2)
    b, runs_b = shard_dir(tmp_path, 2, 2)
    assert (status(a, capsys), status(b, capsys)) == ((0, ["complete"] * 2),) * 2
    out = tmp_path / "merged" / "mc"
    assert main(["merge", str(out), str(a), str(b)]) == 0
    assert status(out, capsys) == (0, ["complete"] * 4)
    doc = json.loads((out / "campaign.json").read_text())
    assert ("shard" in doc, doc["merged_from"]) == (False, [str(a), str(b)])
    record = json.loads((out / merge.MERGE_JSON).read_text())
    assert record["runs"] == {
        **{r.run_id: str(a) for r in runs_a},
        **{r.run_id: str(b) for r in runs_b},
    }
    assert (record["notes"], record["missing"]) == ([], {})
    assert [p.name for p in tmp_path.joinpath("merged").iterdir()] == ["mc"]  # no staging left


def test_a_missing_run_is_named_and_the_rest_is_merged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = shard_dir(tmp_path, 1, 2)
    _, runs_b = shard_dir(tmp_path, 2, 2)
    out = tmp_path / "out"
    assert main(["merge", str(out), str(a)]) == 1
    err = capsys.readouterr().err
    for run in runs_b:
        assert f"mprig: missing: {run.run_id}: in no source\n" in err
    code, statuses = status(out, capsys)
    assert (code, sorted(statuses)) == (1, ["complete", "complete", "missing", "missing"])


def test_an_identical_duplicate_is_taken_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, runs_a = shard_dir(tmp_path, 1, 2)
    b, _ = shard_dir(tmp_path, 2, 2)
    copy = b / runs_a[0].run_id
    copy.mkdir()
    for f in (a / runs_a[0].run_id).iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    out = tmp_path / "out"
    assert main(["merge", str(out), str(a), str(b)]) == 0
    err = capsys.readouterr().err
    assert err == f"mprig: duplicate: {runs_a[0].run_id}: {copy} is identical to " \
                  f"{a / runs_a[0].run_id}; kept one\n"  # fmt: skip
    assert status(out, capsys) == (0, ["complete"] * 4)


def test_two_different_complete_bundles_of_one_run_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, runs_a = shard_dir(tmp_path, 1, 2)
    b, _ = shard_dir(tmp_path, 2, 2)
    put_bundle(b, runs_a[0], payload=b"another capture")
    out = tmp_path / "out"
    assert main(["merge", str(out), str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"mprig: error: run {runs_a[0].run_id} has two different complete bundles: "
        f"{a / runs_a[0].run_id} and {b / runs_a[0].run_id}; remove the one you do not want"
        " from its directory and merge again\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard1", "shard2"]


def test_a_corrupt_bundle_is_left_out_for_the_verified_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, runs_a = shard_dir(tmp_path, 1, 2)
    b, _ = shard_dir(tmp_path, 2, 2)
    bad = put_bundle(b, runs_a[0])
    (bad / "client.pcap").write_bytes(b"flipped bits")
    out = tmp_path / "out"
    assert main(["merge", str(out), str(a), str(b)]) == 0
    assert capsys.readouterr().err == (
        f"mprig: left out: {bad}: artifact client.pcap: sha256 differs from run.json"
        f" (kept {a / runs_a[0].run_id})\n"
    )
    assert (out / runs_a[0].run_id / "client.pcap").read_bytes() == b"pcap bytes"
    assert status(out, capsys) == (0, ["complete"] * 4)


def test_a_run_whose_only_bundle_is_corrupt_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, runs_a = shard_dir(tmp_path, 1, 2)
    b, _ = shard_dir(tmp_path, 2, 2)
    (a / runs_a[0].run_id / "client.pcap").write_bytes(b"flipped bits")
    out = tmp_path / "out"
    assert main(["merge", str(out), str(a), str(b)]) == 1
    why = "artifact client.pcap: sha256 differs from run.json"
    assert f"mprig: missing: {runs_a[0].run_id}: {a}: {why}\n" in capsys.readouterr().err
    assert not (out / runs_a[0].run_id).exists()


def test_shards_of_another_spec_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = shard_dir(tmp_path, 1, 2)
    b, _ = shard_dir(tmp_path, 2, 2, SPEC.replace("delay_ms: 40", "delay_ms: 45"))
    out = tmp_path / "out"
    assert main(["merge", str(out), str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mprig: error: {b} is not the campaign of {a}: spec sha256 ")
    assert err.endswith("; a different plan (run ids); merge only the shards of one campaign"
                        " run from one spec\n")  # fmt: skip
    assert not out.exists()


def test_shards_on_different_lab_inventories_are_one_campaign(tmp_path: Path) -> None:
    a, _ = shard_dir(tmp_path, 1, 2)
    b, _ = shard_dir(tmp_path, 2, 2)
    doc = json.loads((b / "campaign.json").read_text())
    doc["spec"]["rig"]["inventory"] = "inventory/lab2"
    (b / "campaign.json").write_text(json.dumps(doc))
    assert merge.merge(tmp_path / "out", [a, b]).missing == {}


def test_an_existing_out_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = shard_dir(tmp_path, 1, 1)
    out = tmp_path / "out"
    out.mkdir()
    assert main(["merge", str(out), str(a)]) == 2
    assert capsys.readouterr().err == (
        f"mprig: error: {out} exists; merge writes a new directory (name another, or remove it)\n"
    )


def test_a_crash_while_writing_leaves_no_out_and_the_sources_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = shard_dir(tmp_path, 1, 2)
    b, _ = shard_dir(tmp_path, 2, 2)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    real = fsio.write_json

    def full_disk(path: Path, doc: object) -> Path:
        if path.name == merge.MERGE_JSON:
            raise fsio.WriteError(f"{path}: cannot write: No space left on device")
        return real(path, doc)

    monkeypatch.setattr(fsio, "write_json", full_disk)
    with pytest.raises(fsio.WriteError):
        merge.merge(tmp_path / "out", [a, b])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard1", "shard2"]
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    monkeypatch.setattr(fsio, "write_json", real)
    assert merge.merge(tmp_path / "out", [a, b]).missing == {}  # the next merge works


def test_a_directory_without_campaign_json_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = shard_dir(tmp_path, 1, 1)
    assert main(["merge", str(tmp_path / "out"), str(a), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mprig: error: {tmp_path / 'campaign.json'}: not a campaign results")
