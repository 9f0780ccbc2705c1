"""A run's artifacts: which remote files become artifacts and their names in the bundle,
the fetch (one streamed tar per lab host, a virtual rig's files taken where its namespaces
wrote them; per-interface captures joined into one pcapng per host), and what the runner
reads back from them for run.json (tcpdump's kernel drops, the ss sampler's interval, the
traffic tool's summary).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import shutil
import stat
import tarfile
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from mprig.errors import HostError
from mprig.rig import batch
from mprig.run import apps, bundle, capture, commands, latency, rbpm_run, timeline, traffic
from mprig.run.crossflow import cross_files
from mprig.run.run_attempt import Attempt, OutOfSpace, RunFailed, capture_interfaces
from mprig.stack.userpm import files as mptcpd_files


def capture_drops(a: Attempt) -> dict[str, int]:
    """Per capturing host, the packets tcpdump's exit summary (its fetched log) says the
    kernel dropped; a host without a clean summary is left out."""
    drops: dict[str, int] = {}
    cap = a.run.capture
    for host in cap.hosts if cap.enabled else ():
        with contextlib.suppress(OSError, ValueError):
            log = (a.staging / bundle_name(host, "tcpdump.log")).read_text(errors="replace")
            drops[host] = capture.parse_tcpdump_exit(log).kernel_drops
    return drops


def remote_files(a: Attempt) -> dict[str, list[str]]:
    """Per host, the files of its remote directory that become artifacts."""
    files: dict[str, list[str]] = {}
    cap = a.run.capture
    for host in cap.hosts if cap.enabled else ():
        for i in capture_interfaces(a.rig, host):
            files.setdefault(host, []).extend([f"{host}-{i}.pcap", f"tcpdump-{i}.log"])
    files.setdefault(commands.sender(a.run), []).append("ss.txt")
    if a.run.variant.path_manager == "rbpm":
        files.setdefault("client", []).append(rbpm_run.LOG)
    tool = a.run.traffic.tool
    for host in ("client", "server"):
        sends = host == commands.sender(a.run)
        name = traffic.blocks_file(sends) if tool == "blocks" else f"{tool}-{host}.json"
        name = apps.remote_name(tool, sends) or name
        files.setdefault(host, []).append(name)
    for end, names in cross_files(a.run).items():
        files.setdefault(end, []).extend(names)
    files["client"] += latency.files(a.run.traffic, [p.name for p in a.run.paths])
    files["client"] += mptcpd_files(a.run)
    for h, log in timeline.logs(a.run, a.rig.paths, a.rig.attenuators).items():
        files.setdefault(h, []).append(log)
    return files


def fetch_stage(a: Attempt) -> None:
    """Each host's files (tcpdump's log with them: its exit summary says what the kernel
    dropped) streamed as one tar and unpacked as it arrives (the tar itself is never
    stored) under their bundle names: into staging, except
    the per-interface captures and logs, which go to a local scratch directory and reach
    staging joined (in VM mode staging is on the host's file system, where every megabyte
    written and read again costs)."""
    files = remote_files(a)
    with tempfile.TemporaryDirectory(prefix="mprig-fetch-") as scratch:
        parts = Path(scratch)

        def fetch(host: str) -> None:
            wanted = set(files[host])
            try:
                if a.rig.mode in LOCAL_MODES:
                    _take_local(Path(a.remote(host)), host, wanted, parts, a.staging)
                else:
                    take = functools.partial(
                        _untar, host=host, wanted=wanted, parts=parts, staging=a.staging
                    )
                    a.rig.hosts[host].read_tar(a.remote(host), files[host], take)
            except HostError as e:
                raise RunFailed(f"fetch from {host}: {e}", transient=e.transient) from None
            except tarfile.TarError as e:
                raise RunFailed(f"fetch from {host}: {e}", transient=True) from None
            if wanted:
                raise RunFailed(f"{host}: {', '.join(sorted(wanted))} not fetched", transient=True)

        t0 = time.monotonic()
        batch.parallel(fetch, list(files))
        t1 = time.monotonic()
        join_captures(a, parts)
    a.stage_s["fetch"] = round(t1 - t0, 3)
    a.stage_s["join"] = round(time.monotonic() - t1, 3)


# Rig modes whose hosts are network namespaces of this machine: their files are ours.
LOCAL_MODES = ("virtual-native", "virtual-vm")


def _take_local(directory: Path, host: str, wanted: set[str], parts: Path, staging: Path) -> None:
    """A virtual rig's host writes into this machine's file system (its namespaces share
    it), so its files are taken from its directory as the tar would bring them, without a
    tar through its SSH session: under VM emulation that stream of a run's 56 MB of
    captures took 17 s of its 85. Per-interface captures are hard-linked into `parts`
    (copied where they cannot be), the rest copied to staging; only regular files, as
    the tar takes. Each file taken is taken out of `wanted`."""
    for name in sorted(wanted):
        src = directory / name
        try:
            st = os.lstat(src)
        except FileNotFoundError:
            continue  # named among those not fetched
        if not stat.S_ISREG(st.st_mode):
            raise RunFailed(f"{host}: {name} is not a file", transient=True)
        dst = _destination(host, name, parts, staging)
        if not (dst.parent == parts and _linked(src, dst)):
            with open(src, "rb") as f:
                unpack(f, st.st_size, dst, staging)
        wanted.discard(name)


def _linked(src: Path, dst: Path) -> bool:
    """A hard link, where src and dst share a file system (not across them, or on one
    without links)."""
    try:
        os.link(src, dst)
    except OSError:
        return False
    return True


def _untar(stream: IO[bytes], host: str, wanted: set[str], parts: Path, staging: Path) -> None:
    """Unpack host's tar stream under the bundle names: per-interface captures and logs to
    `parts`, the rest to staging. Each file unpacked is taken out of `wanted`."""
    with tarfile.open(fileobj=stream, mode="r|") as t:  # "r|*" would import lzma
        for member in t:
            if member.name not in wanted:
                raise RunFailed(f"{host}: {member.name} was not asked for", transient=True)
            if (src := t.extractfile(member)) is None:
                raise RunFailed(f"{host}: {member.name} is not a file", transient=True)
            wanted.discard(member.name)
            unpack(src, member.size, _destination(host, member.name, parts, staging), staging)


def _destination(host: str, remote_name: str, parts: Path, staging: Path) -> Path:
    """Where a fetched file goes: a per-interface capture or log to `parts` (joined from
    there), the rest to staging, under its bundle name."""
    return (parts if _joined(remote_name) else staging) / bundle_name(host, remote_name)


def unpack(src: IO[bytes], size: int, to: Path, staging: Path) -> None:
    """Write one fetched file (`size` bytes) as it streams in. A full file system is named,
    not a traceback: the results' (staging's) stops the campaign (OutOfSpace, completed runs
    kept); the local scratch's (in VM mode the guest's /tmp, half the guest's memory, which
    holds the run's captures twice while they are fetched: once where they were written,
    once fetched for the join) fails this run only."""
    try:
        with open(to, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        free = shutil.disk_usage(to.parent).free >> 20
        what = f"no space left for {to.name} ({size >> 20} MiB) in {to.parent} ({free} MiB free)"
        if to.parent == staging:
            raise OutOfSpace(f"{what}; free space and rerun (completed runs are kept)") from None
        raise RunFailed(
            f"{what}: this run's captures need about twice their size in the rig's scratch "
            "space; in VM mode give the guest more memory (MPRIG_VM_MEMORY=8G) or capture "
            "less (capture.snaplen, shorter runs)",
            transient=False,
        ) from None


def _joined(remote_name: str) -> bool:
    """A per-interface capture or tcpdump log: joined into one per host."""
    return remote_name.endswith(".pcap") or remote_name.startswith("tcpdump-")


def join_captures(a: Attempt, parts: Path) -> None:
    """Each capturing host's per-interface captures and tcpdump logs (in `parts`) become
    `<host>.pcap` (pcapng, one interface block per data interface, packets in time order)
    and `tcpdump-<host>.log` in staging. The capture is joined in `parts` and copied into
    staging hashed as it is written (a.hashed), so the commit does not read it back; where
    it cannot be joined in `parts` (full), it is joined into staging and hashed at the
    commit."""
    cap = a.run.capture
    for host in cap.hosts if cap.enabled else ():
        ifs = capture_interfaces(a.rig, host)
        pcaps = [(i, parts / bundle_name(host, f"{host}-{i}.pcap")) for i in ifs]
        logs = [(i, parts / bundle_name(host, f"tcpdump-{i}.log")) for i in ifs]
        joined, staged = parts / f".{host}.pcapng", a.staging / f"{host}.pcap"
        try:
            try:
                capture.merge_pcaps(pcaps, joined)
            except OSError:  # full (the C join names no errno): as before, into staging
                joined.unlink(missing_ok=True)
                capture.merge_pcaps(pcaps, staged)
            else:
                a.hashed[staged.name] = _copy_hashed(joined, staged)
                joined.unlink()
        except ValueError as e:
            raise RunFailed(f"{host}: capture: {e}", transient=True) from None
        text = {i: p.read_text(errors="replace") for i, p in logs}
        (a.staging / bundle_name(host, "tcpdump.log")).write_text(capture.join_tcpdump_logs(text))


def _copy_hashed(joined: Path, staged: Path) -> bundle.Stamp:
    """bundle.copy_hashed into staging; a full file system there stops the campaign as a
    fetch into it does (OutOfSpace, completed runs kept)."""
    try:
        return bundle.copy_hashed(joined, staged)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        free = shutil.disk_usage(staged.parent).free >> 20
        raise OutOfSpace(
            f"no space left for {staged.name} ({joined.stat().st_size >> 20} MiB) in "
            f"{staged.parent} ({free} MiB free); free space and rerun (completed runs are kept)"
        ) from None


def bundle_name(host: str, remote_name: str) -> str:
    """The artifact name in the bundle of a file in host's remote directory."""
    if remote_name in ("ss.txt", "tcpdump.log"):
        stem, ext = remote_name.split(".")
        return f"{stem}-{host}.{ext}"
    if remote_name.startswith("bulk-") or remote_name.endswith(".pcap"):
        return f".{remote_name}"  # merged into bulk.json / <host>.pcap, then removed
    if remote_name.startswith("tcpdump-"):
        return f".tcpdump-{host}-{remote_name.removeprefix('tcpdump-')}"  # joined, removed
    return remote_name


def ss_interval(a: Attempt) -> dict[str, Any]:
    """The interval the ss sampler achieved in this run (median, p95 of its samples)."""
    name = bundle_name(commands.sender(a.run), "ss.txt")
    try:
        text = (a.staging / name).read_text(errors="replace")
    except OSError:
        return {}
    try:
        return capture.ss_interval(capture.parse_ss_samples(text))
    except ValueError:  # a header that is not a time: the sampler was cut off mid-line
        return {}


def summarise(a: Attempt) -> dict[str, Any]:
    """Throughput from the traffic tool's own output; RunFailed when it shows a failure."""
    if a.run.traffic.tool == "iperf3":
        try:
            s = traffic.parse_iperf3((a.staging / "iperf3-client.json").read_text())
        except (OSError, ValueError) as e:
            raise RunFailed(f"client: {e}", transient=True) from None
        return {"throughput_bps": s.receiver_bps, "retransmits": s.retransmits}
    if a.run.traffic.tool == "blocks":
        return _blocks_summary(a)
    if (tool := a.run.traffic.tool) in apps.TOOLS:
        try:
            return apps.summary(a.run, a.staging)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise RunFailed(f"{tool}: {e}", transient=True) from None
    return _bulk_summary(a)


def _blocks_summary(a: Attempt) -> dict[str, Any]:
    """Block delays from the receiver's log; a block that never arrived fails the run (the
    byte stream lost data), not retried."""
    try:
        sent = json.loads((a.staging / traffic.BLOCKS_SENT).read_text())["blocks"]
        d = traffic.parse_blocks((a.staging / traffic.BLOCKS_LOG).read_text(), sent)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RunFailed(f"blocks: {e}", transient=True) from None
    if d.missing:
        raise RunFailed(f"blocks: {d.missing} of {sent} blocks never arrived", transient=False)
    size = a.run.traffic.block_bytes or 0
    return {
        "throughput_bps": d.n * size * 8 / max(d.span_s, 1e-9),
        "blocks": d.n,
        "block_delay_p50_ms": d.p50_ms,
        "block_delay_p99_ms": d.p99_ms,
    }


def _bulk_summary(a: Attempt) -> dict[str, Any]:
    docs = {
        h: json.loads((a.staging / f".bulk-{h}.json").read_text()) for h in ("client", "server")
    }
    for h in docs:
        (a.staging / f".bulk-{h}.json").unlink()
    down = a.run.traffic.direction == "download"
    sent, received = (docs["server"], docs["client"]) if down else (docs["client"], docs["server"])
    nbytes = a.run.traffic.bytes or 0
    problem = traffic.check_bulk(sent, received, nbytes)
    doc = {
        "bytes": nbytes,
        "sha256_sent": sent["sha256"],
        "sha256_received": received["sha256"],
        "bytes_received": received["bytes"],
        "seconds": received["seconds"],
    }
    bundle.write_json(a.staging / "bulk.json", doc)
    if problem:
        raise RunFailed(problem, transient=False)
    return {"throughput_bps": nbytes * 8 / max(received["seconds"], 1e-9)}
