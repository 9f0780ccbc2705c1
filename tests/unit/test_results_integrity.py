"""Results that cannot lie (issue 14, part 4): a bundle whose files do not match run.json's
sha256 is "corrupt" in collect, report, compare and nightly (excluded from the numbers and
shown); a bundle copied twice is an error naming both paths; the metrics cache follows
content, not size and mtime; odd run.json files, a second writer and unwritable files end in
one clear line naming the path, never a traceback or a half-written file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import report_synth as synth

from collectors.collect import Options, collect_campaign
from mprig import fsio
from mprig.cli.main import main
from mprig.errors import RigBusy, UsageError
from mprig.run import bundle as bundles

FIXTURE = Path(__file__).parents[1] / "captures" / "test_collect" / "mptcp_download"


def campaign(root: Path, names: tuple[str, ...] = ("r1", "r2")) -> Path:
    """results/fx: one complete bundle per name, each with its own artifacts."""
    camp = root / "fx"
    for name in names:
        shutil.copytree(FIXTURE, camp / name)
        (camp / name / "label.txt").write_text(name)
        record = json.loads((camp / name / "run.json").read_text())
        record |= {"run_id": name, "campaign": "fx"}
        record["artifacts"] = bundles.artifact_hashes(camp / name)
        (camp / name / "run.json").write_text(json.dumps(record))
    return camp


def statuses(camp: Path) -> dict[str, str]:
    runs = pd.read_parquet(camp / "runs.parquet")
    return dict(zip(runs["run_id"], runs["status"], strict=True))


# -- collect ------------------------------------------------------------------------------


def test_collect_marks_a_hash_mismatch_corrupt(tmp_path: Path) -> None:
    camp = campaign(tmp_path)
    with (camp / "r2" / "client.pcap").open("r+b") as f:  # one byte flipped after the run
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    outcome = collect_campaign(camp, Options())
    assert outcome.problems == [
        "r2: corrupt, excluded: artifact client.pcap: sha256 differs from run.json"
    ]
    assert statuses(camp) == {"r1": "complete", "r2": "corrupt"}
    runs = pd.read_parquet(camp / "runs.parquet").set_index("run_id")
    assert runs.loc["r2", ["goodput_bps", "throughput_bps"]].isna().all()


def test_metrics_cache_follows_content_not_mtime(tmp_path: Path) -> None:
    camp = campaign(tmp_path, ("r1",))
    collect_campaign(camp, Options())
    ss = camp / "r1" / "ss-server.txt"
    st = ss.stat()
    text = ss.read_text()
    ss.write_text(text.replace("cwnd:", "cwnd:1", 1)[: len(text)])  # same size, new content
    os.utime(ss, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime
    record = json.loads((camp / "r1" / "run.json").read_text())
    record["artifacts"]["ss-server.txt"] = bundles.sha256_file(ss)  # ... and consistent
    (camp / "r1" / "run.json").write_text(json.dumps(record))
    again = collect_campaign(camp, Options())
    assert [r.reused for r in again.runs] == [False]
    doc = json.loads((camp / "r1" / "metrics.json").read_text())
    assert doc["inputs"]["sha256"]["ss-server.txt"] == bundles.sha256_file(ss)


@pytest.mark.parametrize("how", ["same_dir_copy", "renamed_run_id"])
def test_duplicate_bundles_are_an_error(tmp_path: Path, how: str) -> None:
    camp = campaign(tmp_path)
    shutil.copytree(camp / "r1", camp / "r1-copy")
    if how == "renamed_run_id":  # same content under another id
        record = json.loads((camp / "r1-copy" / "run.json").read_text())
        (camp / "r1-copy" / "run.json").write_text(json.dumps(record | {"run_id": "r9"}))
    with pytest.raises(UsageError) as e:
        collect_campaign(camp, Options())
    assert f"{camp / 'r1'} and {camp / 'r1-copy'} are the same run" in str(e.value)
    assert not (camp / "runs.parquet").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe{}", "not UTF-8 text (byte 0)"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"format": "1", "status": "complete"}', "format must be a whole number, got '1'"),
        (b'{"format": 99, "status": "complete"}', "format 99 is newer than 1; upgrade"),
        (b"[" * 100000, "unreadable"),
    ],
)
def test_odd_run_json_is_corrupt_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    camp = campaign(tmp_path)
    (camp / "r2" / "run.json").write_bytes(content)
    assert main(["collect", str(camp), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"mprig: fx/r2/run.json: {message}" in err
    assert "Traceback" not in err
    assert statuses(camp) == {"r1": "complete", "r2": "corrupt"}


def test_odd_types_in_run_json_do_not_crash(tmp_path: Path) -> None:
    camp = campaign(tmp_path)
    record = json.loads((camp / "r2" / "run.json").read_text())
    record |= {"paths": {"wifi": 3}, "links": "x", "traffic": [1], "variant": 7,
               "timings": {"started": "soon"}, "point": [1], "seed": "s"}  # fmt: skip
    record["artifacts"] = {**record["artifacts"], "../etc/passwd": "00"}
    (camp / "r2" / "run.json").write_text(json.dumps(record))
    outcome = collect_campaign(camp, Options())
    assert outcome.problems == ["r2: corrupt, excluded: artifact ../etc/passwd is missing"]


def test_second_collect_on_one_directory_is_refused(tmp_path: Path) -> None:
    camp = campaign(tmp_path, ("r1",))
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time, pathlib\nfrom mprig import fsio\n"
         "with fsio.results_lock(pathlib.Path(sys.argv[1]), 'mprig collect'):\n"
         "    print('held', flush=True); time.sleep(30)\n", str(camp)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(RigBusy) as e:
            collect_campaign(camp, Options())
        assert f"results directory {camp} (mprig collect) is in use by pid {holder.pid}" in str(
            e.value
        )
        assert not (camp / "runs.parquet").exists()
        # exit 4, not artifact problems' 1: a recipe must not archive what was not collected
        assert main(["collect", str(camp), "--quiet"]) == 4
        assert not (camp / "runs.parquet").exists()
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    collect_campaign(camp, Options())  # the lock died with its holder
    assert statuses(camp) == {"r1": "complete"}


def test_collect_that_cannot_write_exits_4_not_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk is "could not collect" (4), which `make paper-shard` and `mprig backlog`
    stop on; 1 (artifact problems, every table written) is what they archive after."""
    camp = campaign(tmp_path, ("r1",))

    def full_disk(tmp: Path) -> None:
        raise OSError(28, "No space left on device")

    real = fsio.write_with
    monkeypatch.setattr(fsio, "write_with", lambda target, fill, **kw: real(target, full_disk))
    assert main(["collect", str(camp), "--quiet"]) == 4
    err = capsys.readouterr().err
    assert "cannot write: No space left on device; free some space" in err
    assert "Traceback" not in err


def test_a_bug_in_collect_exits_4_with_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    camp = campaign(tmp_path, ("r1",))

    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr("collectors.collect.collect_campaign", broken)
    assert main(["collect", str(camp), "--quiet"]) == 4
    err = capsys.readouterr().err
    assert "Traceback" in err and "stopped on an unexpected KeyError (a bug in mprig" in err


def test_atomic_write_keeps_the_old_file_on_error(tmp_path: Path) -> None:
    target = tmp_path / "figure.svg"
    target.write_text("old and good")

    def half_then_fail(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(fsio.WriteError) as e:
        fsio.write_with(target, half_then_fail)
    assert str(e.value) == f"{target}: cannot write: No space left on device; free some space"
    assert target.read_text() == "old and good"
    assert [p.name for p in tmp_path.iterdir()] == ["figure.svg"]


# -- report, compare, nightly ---------------------------------------------------------------


def _tamper(root: Path, run_id: str) -> None:
    (root / run_id / "iperf3-client.json").write_text("edited after the run")


def test_report_and_compare_exclude_and_show_corrupt_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = synth.write(tmp_path / "base")
    cur = synth.write(tmp_path / "cur", synth.Synth(noise=2))
    bad = synth.run_id("nopr", 10.0, 1)
    _tamper(cur, bad)
    assert main(["report", str(cur), "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "19 complete, 1 failed" in out
    md = (cur / "report" / "report.md").read_text()
    assert f"| {bad} |" in md and "corrupt" in md
    assert "sha256 differs from run.json" in md
    assert main(["compare", str(base), str(cur), "--format", "json"]) == 2
    out = capsys.readouterr().out
    assert "1 corrupt run excluded" in out.splitlines()[-1]
    doc = json.loads((cur / "compare" / "compare.json").read_text())
    assert [c.split(":")[:2] for c in doc["corrupt"]] == [["current", f" corrupt run {bad}"]]
    rows = [r for r in doc["rows"] if r["variant"] == "nopr" and 10.0 in r["point"].values()]
    assert {r["n_current"] for r in rows} == {4}  # the corrupt run is not in the numbers


def test_report_refuses_duplicate_bundles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cur = synth.write(tmp_path / "cur")
    one = synth.run_id("nopr", 10.0, 1)
    shutil.copytree(cur / one, cur / f"{one}-copy")
    assert main(["report", str(cur), "--format", "md"]) == 2
    err = capsys.readouterr().err
    assert f"{cur / one} and {cur / (one + '-copy')} are the same run" in err


def test_nightly_reports_corrupt_runs(tmp_path: Path) -> None:
    from reports import nightly

    base, hist = tmp_path / "baseline", tmp_path / "history"
    first = synth.write(tmp_path / "n1" / "synth")
    assert nightly.nightly("2026-01-01", first, base, hist).exit_code == 0
    second = synth.write(tmp_path / "n2" / "synth", synth.Synth(noise=2))
    _tamper(second, synth.run_id("dsack", 50.0, 2))
    night = nightly.nightly("2026-01-02", second, base, hist)
    assert night.exit_code == 2
    assert "1 corrupt run" in night.verdict


# -- collect's own outputs and run.json against the plan ------------------------------------


def _goodput(camp: Path) -> dict[str, float]:
    runs = pd.read_parquet(camp / "runs.parquet")
    return dict(zip(runs["run_id"], runs["goodput_bps"], strict=True))


@pytest.mark.parametrize("edited", ["metrics.json", "timeseries.parquet"])
def test_an_edited_metrics_cache_is_analysed_again(tmp_path: Path, edited: str) -> None:
    """metrics.json is reused only as collect wrote it: an edited row (or time series) is
    never passed on as the run's result, whatever the artifacts' hashes say."""
    camp = campaign(tmp_path, ("r1",))
    collect_campaign(camp, Options())
    truth = _goodput(camp)
    if edited == "metrics.json":
        doc = json.loads((camp / "r1" / "metrics.json").read_text())
        doc["row"]["goodput_bps"] = 9e9
        (camp / "r1" / "metrics.json").write_text(json.dumps(doc))
    else:
        series = pd.read_parquet(camp / "r1" / "timeseries.parquet")
        series["value"] *= 10
        series.to_parquet(camp / "r1" / "timeseries.parquet", index=False)
    again = collect_campaign(camp, Options())
    assert [r.reused for r in again.runs] == [False]
    assert _goodput(camp) == truth
    assert [r.reused for r in collect_campaign(camp, Options()).runs] == [True]


def planned(camp: Path) -> Path:
    """campaign.json planning the campaign's bundles as they are, and one run never made."""
    plan = []
    for i, run in enumerate(sorted(p for p in camp.iterdir() if p.is_dir())):
        record = json.loads((run / "run.json").read_text())
        keys = ("run_id", "repetition", "seed", "point", "variant", "paths", "traffic")
        plan.append({"index": i, **{k: record[k] for k in keys}})
    other = {**plan[0], "run_id": "tcp-r1", "index": len(plan)}
    other["variant"] = {**plan[0]["variant"], "name": "tcp", "protocol": "tcp"}
    spec = {"name": "fx", "variants": [plan[0]["variant"], other["variant"]]}
    doc = {"format": 1, "campaign": "fx", "spec": spec, "plan": [*plan, other]}
    (camp / "campaign.json").write_text(json.dumps(doc))
    return camp


def _edit(record: dict[str, object], how: str) -> None:
    variant = record["variant"]
    paths = record["paths"]
    assert isinstance(variant, dict) and isinstance(paths, list)
    if how == "variant":
        record["variant"] = {**variant, "name": "tcp", "protocol": "tcp"}
    elif how == "variant_cc":
        record["variant"] = {**variant, "cc": "cubic"}
    elif how == "repetition":
        record["repetition"] = 3
    elif how == "rate":
        paths[0]["down"]["rate_mbit"] = 4.0
    elif how == "traffic":
        record["traffic"] = {**record["traffic"], "duration_s": 60.0}  # type: ignore[dict-item]
    elif how == "campaign":
        record["campaign"] = "other"
    elif how == "run_id":
        record["run_id"] = "tcp-r1"
    elif how == "status":
        record["reason"] = "settings differ from the spec: net.ipv4.tcp_congestion_control"


EDITS = {
    "variant": "variant.name 'tcp' differs from campaign.json's plan ('mptcp')",
    "variant_cc": "variant.cc 'cubic' differs from campaign.json's plan ('bbr')",
    "repetition": "repetition 3 differs from campaign.json's plan (1)",
    "rate": "paths.wifi.down.rate_mbit 4.0 differs from campaign.json's plan (2.0)",
    "traffic": "traffic.duration_s 60.0 differs from campaign.json's plan (1.0)",
    "campaign": "campaign 'other' differs from campaign.json's ('fx')",
    "run_id": "run_id 'tcp-r1' is not its directory's name (r2)",
    "status": "status complete with a failure reason (settings differ from the spec: "
    "net.ipv4.tcp_congestion_control)",
}


@pytest.mark.parametrize("how", list(EDITS))
def test_run_json_that_disagrees_with_its_plan_is_corrupt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """run.json's own fields are not covered by its artifacts' sha256: a record edited (a
    failed run made complete, a run moved to another variant, cell or rate) or copied from
    another run is corrupt in report and collect, never counted as a good run."""
    camp = planned(campaign(tmp_path))
    assert main(["collect", str(camp), "--quiet"]) == 0
    record = json.loads((camp / "r2" / "run.json").read_text())
    _edit(record, how)
    (camp / "r2" / "run.json").write_text(json.dumps(record))
    why = f"run.json {EDITS[how]}; restore the bundle, or remove it and run it again"
    capsys.readouterr()
    assert main(["report", str(camp), "--format", "md"]) == 0
    assert "1 complete, 1 failed" in capsys.readouterr().out
    md = (camp / "report" / "report.md").read_text()
    assert "| r2 |" in md and f"{camp / 'r2'}: {why}" in md
    assert main(["collect", str(camp), "--quiet"]) == 1
    assert f"mprig: fx/r2: corrupt, excluded: {why}" in capsys.readouterr().err
    assert statuses(camp) == {"r1": "complete", "r2": "corrupt"}
