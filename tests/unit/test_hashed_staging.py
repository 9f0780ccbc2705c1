"""A run's joined captures are hashed as they are copied into staging (bundle.copy_hashed,
run_fetch.join_captures), and the commit takes those digests instead of reading the files
back (in VM mode staging is on the host's file system: the read-back cost about 3 s a run
under emulation). A file changed after its stamp is hashed again; where the join cannot be
made in the scratch directory it is made in staging and hashed at the commit, as before."""

from __future__ import annotations

import errno
import hashlib
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from mprig.campaign.plan import expand
from mprig.campaign.spec import parse_campaign
from mprig.rig.host import Rig
from mprig.rig.layout import layout
from mprig.run import bundle, capture, run_fetch, runner
from mprig.run.run_attempt import Attempt, OutOfSpace, capture_interfaces

SPEC = """\
name: hashed
paths:
  - {name: wifi, kind: wifi, rate_mbit: 20, delay_ms: 10}
  - {name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40}
variants:
  - {name: mptcp}
traffic: {tool: iperf3, duration_s: 5}
"""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files bundle.sha256_file reads from now on."""
    read: list[str] = []
    real = bundle.sha256_file
    monkeypatch.setattr(bundle, "sha256_file", lambda p: read.append(p.name) or real(p))
    return read


def test_copy_hashed_gives_the_copys_sha256_and_stamp(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(os.urandom(3 * (1 << 20) + 123))  # blocks of 1 MiB and a short one
    size, mtime_ns, sha = bundle.copy_hashed(src, dst)
    st = os.stat(dst)
    assert (size, mtime_ns, sha) == (st.st_size, st.st_mtime_ns, digest(src))
    assert dst.read_bytes() == src.read_bytes()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert bundle.copy_hashed(empty, tmp_path / "e2")[2] == hashlib.sha256().hexdigest()


def test_a_stamped_file_is_not_read_again_and_a_changed_one_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    (tmp_path / "cap").write_bytes(b"p" * 5000)
    known = {"client.pcap": bundle.copy_hashed(tmp_path / "cap", staging / "client.pcap")}
    (staging / "ss-server.txt").write_text("# 1\n")
    read = counting(monkeypatch)
    got = bundle.artifact_hashes(staging, known)
    assert (read, got["client.pcap"]) == (["ss-server.txt"], digest(staging / "client.pcap"))
    (staging / "client.pcap").write_bytes(b"q" * 5001)  # changed after its stamp
    assert bundle.artifact_hashes(staging, known)["client.pcap"] == digest(staging / "client.pcap")
    (staging / "client.pcap").write_bytes(b"r" * 5000)  # the same size, a later mtime
    os.utime(staging / "client.pcap", ns=(known["client.pcap"][1] + 10**9,) * 2)
    assert bundle.artifact_hashes(staging, known)["client.pcap"] == digest(staging / "client.pcap")


class FakeRig:
    name, mode = "hashed", "virtual"


def test_the_commit_takes_the_attempts_digests_and_records_no_private_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = expand(parse_campaign(SPEC, "hashed.yaml"))[0]

    def one_attempt(ctx: Any, run: Any, number: int) -> dict[str, Any]:
        staging = bundle.partial_dir(ctx.results, run.run_id)
        staging.mkdir()
        (tmp_path / "cap").write_bytes(b"c" * 4096)
        stamp = bundle.copy_hashed(tmp_path / "cap", staging / "client.pcap")
        return {"status": "complete", "reason": "", "timings": {"traffic_s": 5.0},
                "_transient": False, "_hashed": {"client.pcap": stamp}}  # fmt: skip

    monkeypatch.setattr(runner, "one_attempt", one_attempt)
    ctx = runner.Context(None, FakeRig(), tmp_path, None)  # type: ignore[arg-type]
    read = counting(monkeypatch)
    record = runner.execute(ctx, run)
    assert read == []  # the capture was hashed as it was staged, not read back
    on_disk = bundle.read_record(tmp_path / run.run_id)
    assert not [k for k in on_disk if k.startswith("_")], sorted(on_disk)
    assert "_hashed" not in record and "_transient" not in record
    assert bundle.verify(tmp_path / run.run_id).ok


def write_pcap(path: Path, stamps: list[int]) -> None:
    """A classic pcap (Ethernet, snaplen 200) with one 60-byte packet at each second."""
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 200, 1)
    for t in stamps:
        data += struct.pack("<IIII", t, 0, 60, 60) + bytes(60)
    path.write_bytes(data)


def join_attempt(tmp_path: Path) -> tuple[Attempt, Path]:
    run = expand(parse_campaign(SPEC, "hashed.yaml"))[0]
    rig = Rig("t", {}, layout(run.paths), "10.0.0.1", "virtual-native")
    a = Attempt(rig, run, tmp_path / "staging")
    a.staging.mkdir()
    parts = tmp_path / "parts"
    parts.mkdir()
    for host in run.capture.hosts:
        for k, i in enumerate(capture_interfaces(rig, host)):
            write_pcap(parts / run_fetch.bundle_name(host, f"{host}-{i}.pcap"), [k + 1, k + 3])
            (parts / run_fetch.bundle_name(host, f"tcpdump-{i}.log")).write_text("0 dropped\n")
    return a, parts


def test_a_joined_capture_is_stamped_with_its_sha256(tmp_path: Path) -> None:
    a, parts = join_attempt(tmp_path)
    run_fetch.join_captures(a, parts)
    hosts = sorted(a.run.capture.hosts)
    assert sorted(a.hashed) == [f"{h}.pcap" for h in hosts]
    for h in hosts:
        staged = a.staging / f"{h}.pcap"
        assert a.hashed[staged.name][2] == digest(staged)
        assert len(capture.pcapng_interfaces(staged)) == len(capture_interfaces(a.rig, h))
    assert not list(parts.glob("*.pcapng"))  # the scratch copies are gone


def test_a_join_that_fails_in_the_scratch_is_made_in_staging_unstamped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, parts = join_attempt(tmp_path)
    real = capture.merge_pcaps

    def full_scratch(pcaps: Any, out: Path) -> int:
        if out.parent == parts:
            out.write_bytes(b"half")
            raise OSError(f"{out}: No space left on device")
        return real(pcaps, out)

    monkeypatch.setattr(capture, "merge_pcaps", full_scratch)
    run_fetch.join_captures(a, parts)
    assert a.hashed == {}
    for h in a.run.capture.hosts:
        assert capture.pcapng_interfaces(a.staging / f"{h}.pcap")
    assert not list(parts.glob("*.pcapng"))


def test_a_full_results_file_system_stops_the_campaign_as_a_fetch_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, parts = join_attempt(tmp_path)

    def full(src: Path, dst: Path) -> bundle.Stamp:
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))

    monkeypatch.setattr(bundle, "copy_hashed", full)
    with pytest.raises(OutOfSpace, match=r"no space left for \w+\.pcap .*completed runs are kept"):
        run_fetch.join_captures(a, parts)
