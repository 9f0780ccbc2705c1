"""The virtual rig with two paths, natively: SSH with host key checking, Ansible, MPTCP over
both client interfaces, offloads, policy routing, background commands, and a teardown that
leaves nothing behind. One rig per module (about 4 s to build)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO

import pytest

from mprig.campaign.spec import Direction
from mprig.campaign.spec import Path as SpecPath
from mprig.errors import HostError, RigBusy
from mprig.rig import layout as L
from mprig.rig import netns, provision, virtual
from mprig.rig.host import Rig
from mprig.rig.ssh import SshHost
from mprig.run.run_attempt import wait_cmd

NAME = "h2two"
D = Direction(rate_mbit=10)
PATHS = (
    SpecPath(name="wifi", kind="wifi", down=D, up=D),
    SpecPath(name="cell", kind="cellular", down=D, up=D),
)


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    virtual.down(NAME)
    built = virtual.up(NAME, PATHS)
    try:
        yield built
    finally:
        virtual.down(NAME)


def iperf_mptcp(rig: Rig, rates_mbit: dict[str, int], seconds: int = 2) -> dict[str, object]:
    """A `mptcpize run iperf3` download with each path shaped by a tbf at its rate (by
    client interface) on its router; returns joins seen by the server and bytes per client
    interface. The rig leaves its paths unshaped (the runner shapes them per run): unshaped,
    the download is bound by the CPU and how it splits over the subflows is the scheduler's
    whim (a CI run beside the VM tests saw a four-path rig's last subflow carry under 1 MB
    in 5 s while two others carried 2.2 GB). This kernel has no netem: rates, no delays."""
    client, server = rig.hosts["client"], rig.hosts["server"]
    ifs = [link.client_if for link in rig.paths]

    def rx() -> dict[str, int]:
        cat = ["cat", *(f"/sys/class/net/{i}/statistics/rx_bytes" for i in ifs)]
        return dict(zip(ifs, map(int, client.run(cat).stdout.split()), strict=True))

    def joins() -> int:
        out = server.run(["nstat", "-az", "MPTcpExtMPJoinAckRx"]).stdout
        return int(re.search(r"MPTcpExtMPJoinAckRx\s+(\d+)", out).group(1))  # type: ignore[union-attr]

    try:
        for link in rig.paths:
            tbf = ["tbf", "rate", f"{rates_mbit[link.client_if]}mbit", "burst", "32kb",
                   "latency", "100ms"]  # fmt: skip
            on_router = ["tc", "qdisc", "replace", "dev", link.router_client_if, "root", *tbf]
            rig.hosts[link.router].run(on_router)
        j0, b0 = joins(), rx()
        srv = server.start(
            ["mptcpize", "run", "iperf3", "-s", "-1", "-B", rig.server_addr],
            log=f"/tmp/{NAME}-iperf.log",
        )
        ready = wait_cmd('listening "$1"', "5201", limit=30)  # iperf3's port; no fixed sleep
        server.run(ready.argv, timeout=ready.timeout)
        argv = ["mptcpize", "run", "iperf3", "-c", rig.server_addr, "-t", str(seconds), "-R"]
        report = json.loads(client.run([*argv, "-J"], timeout=seconds + 30).stdout)
        assert srv.wait(10).returncode == 0
        b1 = rx()
    finally:
        for link in rig.paths:
            off = ["tc", "qdisc", "del", "dev", link.router_client_if, "root"]
            rig.hosts[link.router].run(off, check=False)
    return {
        "joins": joins() - j0,
        "bytes": {i: b1[i] - b0[i] for i in ifs},
        "received": report["end"]["sum_received"]["bytes"],
    }


def test_every_host_answers_over_ssh_from_its_own_namespace(rig: Rig) -> None:
    got = {}
    for name, host in rig.hosts.items():
        out = host.run(["ip", "-4", "-br", "addr", "show", "dev", L.MGMT_IF]).stdout.split()
        got[name] = out[-1]
    assert got == {h: f"{L.mgmt_addr(h)}/24" for h in ("client", "server", "ap", "cell")}


def test_argv_is_quoted_for_the_remote_shell(rig: Rig) -> None:
    r = rig.hosts["server"].run(["printf", "%s|", "a b", "$(id)", "x;y", "'q'"])
    assert (r.returncode, r.stdout) == (0, "a b|$(id)|x;y|'q'|")


def test_wrong_known_hosts_entry_is_refused(rig: Rig, tmp_path: Path) -> None:
    state = virtual.state_dir(NAME)
    lines = (state / "known_hosts").read_text().splitlines()
    server_key = next(ln for ln in lines if ln.startswith(L.mgmt_addr("server")))
    # the client's address now claims the server's host key
    forged = [f"{L.mgmt_addr('client')} {server_key.split(' ', 1)[1]}", *lines[1:]]
    (tmp_path / "known_hosts").write_text("\n".join(forged) + "\n")
    config = (state / "ssh_config").read_text()
    config = config.replace(f"{state}/known_hosts", f"{tmp_path}/known_hosts")
    config = config.replace(f"ControlPath {state}/cm/%C", "ControlPath none")  # no good mux
    (tmp_path / "ssh_config").write_text(config)
    host = SshHost("client", "client", tmp_path / "ssh_config", L.namespace(NAME, "ctl"))
    with pytest.raises(HostError, match="host key verification failed") as e:
        host.run(["true"])
    assert e.value.transient is False


def test_unreachable_host_is_a_transient_error(rig: Rig) -> None:
    ghost = SshHost(
        "ghost", "10.254.0.99", virtual.state_dir(NAME) / "ssh_config", L.namespace(NAME, "ctl")
    )
    with pytest.raises(HostError, match="ghost: unreachable over SSH") as e:
        ghost.run(["true"], timeout=20)
    assert e.value.transient is True


def test_failing_command_names_host_and_command(rig: Rig) -> None:
    with pytest.raises(HostError, match=r"^ap: `ls /nonexistent` exited 2: "):
        rig.hosts["ap"].run(["ls", "/nonexistent"])
    r = rig.hosts["ap"].run(["sh", "-c", "exit 3"], check=False)
    assert r.returncode == 3


def test_background_command_stops_on_sigint_and_reports_its_status(rig: Rig) -> None:
    host = rig.hosts["client"]
    bg = host.start(["sh", "-c", "echo started; exec sleep 60"], log=f"/tmp/{NAME}-bg.log")
    time.sleep(0.2)
    r = bg.stop(signal="INT", timeout=5)
    assert (r.returncode, r.stdout) == (130, "started\n")
    done = host.start(["sh", "-c", "echo out; echo err >&2; exit 4"], log=f"/tmp/{NAME}-bg2.log")
    assert (done.wait(5).returncode, done.wait(5).stdout) == (4, "out\nerr\n")


def test_fetch_copies_a_remote_file(rig: Rig, tmp_path: Path) -> None:
    rig.hosts["server"].fetch(f"{virtual.state_dir(NAME)}/known_hosts", tmp_path / "kh")
    assert (tmp_path / "kh").read_text() == (virtual.state_dir(NAME) / "known_hosts").read_text()
    with pytest.raises(HostError, match="server: fetch /nonexistent-h2 failed: cat: ") as e:
        rig.hosts["server"].fetch("/nonexistent-h2", tmp_path / "missing")
    assert e.value.transient is False


def test_read_tar_streams_the_named_files_and_names_a_missing_one(rig: Rig) -> None:
    """A run's files come back as one tar streamed over the host's session into the reader,
    nothing stored on either side: the files byte for byte (a binary one of 10 MB too), a
    file that is not there fails the fetch with its name, and a reader that fails midway
    has its error raised after the stream is drained, the session still usable."""
    import tarfile

    host, remote = rig.hosts["client"], f"/tmp/{NAME}-tar"
    payload = bytes(range(256)) * 40_000
    host.run(["mkdir", "-p", remote])
    host.run(["sh", "-c", 'cat > "$1"/a.bin; echo text > "$1"/b.txt', "w", remote],
             input=payload)  # fmt: skip
    got: dict[str, bytes] = {}

    def keep(stream: IO[bytes]) -> None:
        with tarfile.open(fileobj=stream, mode="r|") as t:
            for m in t:
                got[m.name] = t.extractfile(m).read()  # type: ignore[union-attr]

    host.read_tar(remote, ["a.bin", "b.txt"], keep)
    assert got == {"a.bin": payload, "b.txt": b"text\n"}
    with pytest.raises(HostError, match=r"client: fetch .*-tar: a.bin gone.txt failed: .*gone"):
        host.read_tar(remote, ["a.bin", "gone.txt"], keep)

    def give_up(stream: IO[bytes]) -> None:
        stream.read(1000)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        host.read_tar(remote, ["a.bin", "b.txt"], give_up)
    assert host.script("echo still here").stdout == "still here\n"
    host.run(["rm", "-r", remote])


def test_scripts_run_over_one_session_per_host_in_its_namespace(rig: Rig) -> None:
    seen = {}
    for name, host in rig.hosts.items():
        script = f"ip -4 -br addr show dev {L.MGMT_IF}; echo shell=$$ level=$SHLVL"
        first, again = host.script(script).stdout, host.script(script).stdout
        assert first == again  # the same remote shell answered both
        seen[name] = first.split()
    assert {h: out[2] for h, out in seen.items()} == {
        h: f"{L.mgmt_addr(h)}/24" for h in ("client", "server", "ap", "cell")
    }
    # sshd sets SHLVL=1, so the remote bash skips ~/.bashrc (slow under VM emulation)
    assert {out[-1] for out in seen.values()} == {"level=2"}


def test_a_script_on_an_unreachable_host_is_a_transient_error(rig: Rig) -> None:
    ghost = SshHost(
        "ghost", "10.254.0.99", virtual.state_dir(NAME) / "ssh_config", L.namespace(NAME, "ctl")
    )
    with pytest.raises(HostError, match="ghost: unreachable over SSH") as e:
        ghost.script("true", timeout=20)
    assert e.value.transient is True


def test_offloads_are_off_on_client_interfaces(rig: Rig) -> None:
    for link in rig.paths:
        out = rig.hosts["client"].run(["ethtool", "-k", link.client_if]).stdout
        feats = dict(ln.strip().split(": ", 1) for ln in out.splitlines()[1:] if ": " in ln)
        got = {
            k: feats[k]
            for k in (
                "tcp-segmentation-offload",
                "generic-segmentation-offload",
                "generic-receive-offload",
                "large-receive-offload",
            )
        }
        assert got == {
            "tcp-segmentation-offload": "off",
            "generic-segmentation-offload": "off",
            "generic-receive-offload": "off",
            "large-receive-offload": "off [fixed]",
        }


def test_each_host_walks_a_socket_hash_of_its_own(rig: Rig) -> None:
    """Every host's namespace has its own 1024-bucket TCP hash (a socket dump walks only
    it), with the SYN backlog and TIME-WAIT limits a namespace sharing the kernel's gets."""
    keys = ["net.ipv4.tcp_ehash_entries", *netns.SIZED_BY_EHASH]

    def read(ns: str) -> list[int]:
        return [int(v) for v in netns.in_ns(ns, "sysctl", "-n", *keys).split()]

    ctl = read(L.namespace(NAME, "ctl"))
    assert ctl[0] < 0  # ctl shares the kernel's table (a negative size says so)
    got = {h: read(L.namespace(NAME, h)) for h in rig.hosts}
    assert got == {h: [netns.EHASH_ENTRIES, *ctl[1:]] for h in rig.hosts}
    # a dump of the client's own table finds the SSH session this command came in on
    out = rig.hosts["client"].run(["ss", "-tnH", "state", "established"]).stdout
    peers = [line.split()[-1].rsplit(":", 1)[0] for line in out.splitlines()]
    assert L.CTL_ADDR in peers, out


def test_client_has_one_table_per_interface(rig: Rig) -> None:
    rules = rig.hosts["client"].run(["ip", "rule", "show"]).stdout.splitlines()
    assert [r.split(":", 1)[1].split() for r in rules if r.startswith("10")] == [
        ["from", "10.1.1.2", "lookup", "101"],
        ["from", "10.2.1.2", "lookup", "102"],
    ]
    out = rig.hosts["client"].run(["ip", "route", "show", "table", "102"]).stdout
    assert out.split() == ["default", "via", "10.2.1.1", "dev", "wwan0"]


def test_playbook_restores_endpoints_and_a_second_run_changes_nothing(rig: Rig) -> None:
    client = rig.hosts["client"]
    client.run(["ip", "mptcp", "endpoint", "flush"])
    client.run(["ip", "mptcp", "limits", "set", "subflows", "1"])
    state = virtual.state_dir(NAME)
    ctl = L.namespace(NAME, "ctl")
    provision.apply(state / "inventory", state, netns=ctl)
    out = client.run(["ip", "mptcp", "endpoint", "show"]).stdout
    assert out.splitlines() == [
        "10.1.1.2 id 1 subflow dev wlan0 ",
        "10.2.1.2 id 2 subflow dev wwan0 ",
    ]
    limits = client.run(["ip", "mptcp", "limits", "show"]).stdout.split()
    assert limits == ["add_addr_accepted", "8", "subflows", "8"]
    out = provision.apply(state / "inventory", state, netns=ctl)
    recap = dict(re.findall(r"^(\w+)\s+: ok=\d+\s+changed=(\d+)", out, re.M))
    assert recap == {"client": "0", "server": "0"}


def test_mptcp_download_uses_both_client_interfaces(rig: Rig) -> None:
    got = iperf_mptcp(rig, {"wlan0": 10, "wwan0": 10})
    # iperf3 opens two MPTCP connections (control and data): one join each for path 2
    assert got["joins"] == 2
    # each subflow carried data (1-2 MB each at 10 Mbit/s in 2 s); a join alone is 1 KB
    busy = {i for i, n in got["bytes"].items() if n > 256_000}  # type: ignore[attr-defined]
    assert busy == {"wlan0", "wwan0"}, got["bytes"]


def test_up_again_reuses_the_rig_and_the_lock_serializes(rig: Rig) -> None:
    again = virtual.up(NAME, PATHS)
    assert replace(again, hosts={}) == replace(rig, hosts={})
    busy = pytest.raises(RigBusy, match=f"rig {NAME} is being built")
    with virtual.rig_lock(NAME), busy, virtual.rig_lock(NAME, timeout=0.3):
        pass


def test_status_lists_hosts_endpoints_and_sshd(rig: Rig) -> None:
    st = virtual.status(NAME)
    assert (st["up"], sorted(st["hosts"])) == (True, ["ap", "cell", "client", "ctl", "server"])
    assert st["hosts"]["client"]["mptcp_endpoints"] == [
        "10.1.1.2 id 1 subflow dev wlan0",
        "10.2.1.2 id 2 subflow dev wwan0",
    ]
    assert st["hosts"]["server"]["sshd"].startswith("running (pid ")


def test_lab_cc_check_reads_the_senders_kernels_over_ssh(rig: Rig) -> None:
    from mprig.campaign.spec import Variant
    from mprig.stack import lab_cc

    lab_cc.check(rig, [Variant(name="a", cc="reno"), Variant(name="b")], Path("inventory/lab"))
    with pytest.raises(HostError) as exc:
        lab_cc.check(rig, [Variant(name="a", cc="reno"), Variant(name="b", cc="vegas")],
                     Path("inventory/lab"))  # fmt: skip
    assert str(exc.value) == (
        "client: congestion control not available (client lacks vegas; server lacks vegas). "
        "vegas: not an mprig program; load its kernel module (modprobe tcp_<name>) or choose "
        "another cc"
    )


def test_doctor_lab_checks_report_each_bpf_program_per_sender(rig: Rig) -> None:
    from mprig.campaign import presets
    from mprig.stack import bpfcc, lab_cc

    here = presets.parse_available_cc(Path(lab_cc.AVAILABLE).read_text())  # one kernel
    rows = lab_cc.host_checks(rig)
    assert [(h, n) for h, n, _, _ in rows] == [
        (h, n) for h in ("client", "server") for n in bpfcc.available()
    ]
    for _, name, ok, detail in rows:
        assert (ok, detail == "registered") == (name in here, name in here)
        if not ok:  # this machine has BTF and the toolchain (make setup installs it)
            assert detail == "not registered: run site.yml with bpf_cc_programs naming it"


def test_down_leaves_nothing_behind(rig: Rig) -> None:
    """Last test of the module: tear down, then look for anything of the rig."""
    rig.hosts["server"].start(["sleep", "300"], log=f"/tmp/{NAME}-orphan.log")  # must be killed
    assert len(virtual.leftovers(NAME)) > 10
    virtual.down(NAME)
    assert virtual.leftovers(NAME) == []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    assert [n for n in netns.stdout.split() if n.startswith(f"mprig-{NAME}-")] == []
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    assert [
        ln for ln in ps.stdout.splitlines() if f"/run/mprig/{NAME}/" in ln or f"/tmp/{NAME}-" in ln
    ] == []
