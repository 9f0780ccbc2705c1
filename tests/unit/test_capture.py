"""Capture parsers, fed real tcpdump 4.99, ss (iproute2 6.1) and nstat output."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pcap_oracle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mprig.campaign.plan import expand
from mprig.campaign.spec import load_campaign
from mprig.rig.layout import layout
from mprig.run import capture, commands

CAPTURES = Path(__file__).parent.parent / "captures" / "test_capture"
FIXTURES = Path(__file__).parent.parent / "captures" / "test_collectors_fixtures"
SMOKE = Path(__file__).parents[2] / "experiments" / "smoke.yaml"


def test_tcpdump_exit_summary() -> None:
    log = (CAPTURES / "tcpdump_any_exit.txt").read_text()
    assert capture.tcpdump_listening(log)
    assert capture.parse_tcpdump_exit(log) == capture.TcpdumpSummary(0, 0, 0)


def test_tcpdump_exit_summary_with_drops() -> None:
    log = (
        "tcpdump: listening on any, link-type LINUX_SLL2 (Linux cooked v2), snapshot length"
        " 200 bytes\n24019 packets captured\n25200 packets received by filter\n"
        "1181 packets dropped by kernel\n"
    )
    assert capture.parse_tcpdump_exit(log) == capture.TcpdumpSummary(24019, 25200, 1181)


def test_tcpdump_killed_without_summary() -> None:
    with pytest.raises(ValueError, match="no 'captured' line"):
        capture.parse_tcpdump_exit("tcpdump: listening on any, link-type LINUX_SLL2\n")
    assert not capture.tcpdump_listening("tcpdump: data link type LINUX_SLL2\n")


def test_ss_samples() -> None:
    one = (CAPTURES / "ss_mptcp_loopback.txt").read_text()
    text = f"# 1763704101.125000000\n{one}# 1763704101.227000000\n"
    samples = capture.parse_ss_samples(text)
    assert [s.time for s in samples] == [1763704101.125, 1763704101.227]
    assert len(samples[0].sockets) == 8
    assert samples[1].sockets == ()
    first, detail = samples[0].sockets[0]
    assert first == "tcp ESTAB 0 0 127.0.0.1:35811 127.0.0.1:5399"
    assert detail.startswith("bbr wscale:10,10 rto:204 rtt:0.01/0.005 ato:40 mss:32768")
    assert samples[0].sockets[4][0] == "mptcp ESTAB 2174439 0 127.0.0.1:35811 127.0.0.1:5399"


def test_ss_interval_from_sample_times() -> None:
    times = [100.0, 100.1, 100.2, 100.35, 100.45, 100.55]
    text = "".join(f"# {t:.6f}\ntcp ESTAB 0 0 10.0.0.1:5201 10.0.0.2:40000\n" for t in times)
    got = capture.ss_interval(capture.parse_ss_samples(text))
    assert got == {"configured_s": 0.1, "median_s": 0.1, "p95_s": 0.15, "samples": 6}
    empty = {"configured_s": 0.1, "median_s": None, "p95_s": None, "samples": 1}
    assert capture.ss_interval(capture.parse_ss_samples("\n".join(text.splitlines()[:2]))) == empty


def test_ss_sampler_takes_its_interval_as_an_argument() -> None:
    argv = capture.ss_sampler_argv(0.25, ports=[6000])
    assert argv == ["python3", "-I", "-S", "-c", capture.ss_source(), "250000", "6000"]
    assert capture.ss_sampler_argv()[-3:] == ["100000", "5201", "5202"]
    assert capture.ss_shown(argv)[4] == "mprig/run/ss_agent.py"


def test_nstat_is_read_by_bash_builtins() -> None:
    # a subshell of the stage's script (batch._subshell), no program started; what it
    # prints is compared with nstat's own in tests/integration/test_nstat_builtin_native.py
    assert capture.nstat_argv() == ["bash", "-c", capture.NSTAT_SCRIPT, "mprig-nstat"]


def test_tcpdump_argv_names_one_data_interface_and_keeps_ip_only() -> None:
    # IP only: the EAPOL frames of a Wi-Fi client's WPA2 key exchange, ARP and LLDP stay out.
    assert capture.tcpdump_argv("/tmp/x/client-wlan0.pcap", 200, "wlan0") == [
        "tcpdump", "-i", "wlan0", "-n", "-U", "-s", "200", "-w", "/tmp/x/client-wlan0.pcap",
        "(", "ip", "or", "ip6", ")", "and", "not", "tcp", "port", "22",
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["any", "", "-w", "wlan0 ", "a/b", "x" * 16, "lo"])
def test_tcpdump_refuses_any_and_names_that_are_not_interfaces(name: str) -> None:
    with pytest.raises(ValueError, match="not a data interface name"):
        capture.tcpdump_argv("/tmp/x/client.pcap", 200, name)


def test_plan_commands_capture_on_each_data_interface_never_any() -> None:
    runs = expand(load_campaign(SMOKE))
    links = layout(runs[0].paths)
    caps = [(h, argv[2]) for h, argv in commands.for_run(runs[0], links) if argv[0] == "tcpdump"]
    assert caps == [("client", "wlan0"), ("client", "wwan0"), ("server", "p1"), ("server", "p2")]


def test_tcpdump_logs_of_several_interfaces_add_up() -> None:
    one = (CAPTURES / "tcpdump_any_exit.txt").read_text()
    drops = (
        "tcpdump: listening on wwan0, link-type EN10MB (Ethernet), snapshot length 200 bytes\n"
        "24019 packets captured\n25200 packets received by filter\n"
        "1181 packets dropped by kernel\n"
    )
    text = capture.join_tcpdump_logs({"wlan0": one, "wwan0": drops})
    assert text.splitlines()[0] == "# tcpdump -i wlan0"
    assert capture.parse_tcpdump_exit(text) == capture.TcpdumpSummary(24019, 25200, 1181)
    cut = capture.join_tcpdump_logs({"wlan0": one, "wwan0": drops.split("24019")[0]})
    with pytest.raises(ValueError, match="wwan0: no 'captured' line"):
        capture.parse_tcpdump_exit(cut)


def test_per_interface_captures_merge_into_one_the_collectors_read_alike(tmp_path: Path) -> None:
    """A two-subflow capture split by subflow into two interfaces' files, then merged: the
    collectors see the same connection, subflows and counts as in the original."""
    from scapy.layers.inet import IP
    from scapy.utils import rdpcap, wrpcap

    from collectors.analyze import analyze_pcap

    original = FIXTURES / "reorder_two_subflows.pcap"
    packets = rdpcap(str(original))
    first = packets[0][IP].src
    parts = {"wlan0": [p for p in packets if first in (p[IP].src, p[IP].dst)]}
    parts["wwan0"] = [p for p in packets if first not in (p[IP].src, p[IP].dst)]
    assert [len(v) > 0 for v in parts.values()] == [True, True]
    files = []
    for name, pkts in parts.items():
        wrpcap(str(tmp_path / f"client-{name}.pcap"), pkts)
        files.append((name, tmp_path / f"client-{name}.pcap"))
    merged = tmp_path / "client.pcap"
    assert capture.merge_pcaps(files, merged) == len(packets)
    assert merged.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"  # pcapng: one block per interface
    before = [c.summary() for c in analyze_pcap(original).connections]
    after = analyze_pcap(merged)
    assert ([c.summary() for c in after.connections], after.warnings) == (before, [])
    assert capture.pcapng_interfaces(merged) == [("wlan0", 1), ("wwan0", 1)]


def _epb_interfaces(path: Path) -> list[int]:
    """The interface id of every enhanced packet block of a pcapng file, in file order."""
    data, ids, pos = path.read_bytes(), [], 0
    while pos + 12 <= len(data):
        kind, n = struct.unpack("<II", data[pos : pos + 8])
        if kind == 6:
            ids.append(struct.unpack("<I", data[pos + 8 : pos + 12])[0])
        pos += n
    return ids


def test_merged_packets_keep_the_interface_they_were_captured_on(tmp_path: Path) -> None:
    """Each packet block names its own interface: tshark's frame.interface_id must say
    wlan0 for wlan0's packets (the first merge tagged every packet with the last one).
    Ties in time go to the interface listed first; a record cut short ends its file."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    def pkt(t: float, port: int) -> Ether:
        p = Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(dport=port) / (b"x" * (port % 7))
        p.time = t
        return p

    wlan = [pkt(1.0, 1), pkt(1.2, 2), pkt(1.5, 3)]
    wwan = [pkt(1.1, 11), pkt(1.5, 12), pkt(1.7, 13)]
    wrpcap(str(tmp_path / "a.pcap"), wlan)
    wrpcap(str(tmp_path / "b.pcap"), wwan)
    with (tmp_path / "b.pcap").open("ab") as f:
        f.write(struct.pack("<IIII", 2, 0, 60, 60) + b"cut")  # tcpdump killed mid-write
    merged = tmp_path / "m.pcapng"
    parts = [("wlan0", tmp_path / "a.pcap"), ("wwan0", tmp_path / "b.pcap")]
    assert capture.merge_pcaps(parts, merged) == 6
    assert _epb_interfaces(merged) == [0, 1, 0, 0, 1, 1]
    ports = subprocess.run(
        ["tshark", "-r", str(merged), "-T", "fields", "-e", "frame.interface_name",
         "-e", "udp.dstport"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    assert ports == ["wlan0", "1", "wwan0", "11", "wlan0", "2", "wlan0", "3", "wwan0", "12",
                     "wwan0", "13"]  # fmt: skip


# One generated classic pcap: byte order, timestamp resolution, linktype, snaplen, records
# (seconds, fraction, original length, captured bytes) and an optional cut-short tail.
_records = st.lists(
    st.tuples(
        st.integers(0, 3), st.integers(0, 999_999), st.integers(0, 2000), st.binary(max_size=70)
    ),
    max_size=25,
)
_pcap = st.tuples(
    st.sampled_from(["<", ">"]),
    st.sampled_from([0xA1B2C3D4, 0xA1B23C4D]),
    st.sampled_from([1, 105, 276]),
    st.integers(64, 262144),
    _records,
    st.binary(max_size=30),
)


def _write_pcap(path: Path, spec: tuple) -> None:  # type: ignore[type-arg]
    order, magic, linktype, snaplen, records, tail = spec
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for sec, frac, origlen, data in records:
        out.append(struct.pack(order + "IIII", sec, frac, len(data), origlen) + data)
    path.write_bytes(b"".join(out) + tail)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(_pcap, min_size=1, max_size=3),
    names=st.sampled_from([("wlan0", "wwan0", "x"), ("p1", "a-long-interface-name", "e")]),
)
def test_compiled_join_equals_the_python_statement_byte_for_byte(
    tmp_path: Path,
    files: list,
    names: tuple,  # type: ignore[type-arg]
) -> None:
    """Any captures tcpdump could leave (either byte order, micro- or nanosecond stamps,
    timestamps out of order and tied across files, odd lengths, a record cut short or junk
    at the end) join to exactly the bytes tests/pcap_oracle.py states."""
    parts = []
    for k, spec in enumerate(files):
        _write_pcap(tmp_path / f"{k}.pcap", spec)
        parts.append((names[k], tmp_path / f"{k}.pcap"))
    n = capture.merge_pcaps(parts, tmp_path / "c.pcapng")
    assert n == pcap_oracle.merge(parts, tmp_path / "py.pcapng")
    assert (tmp_path / "c.pcapng").read_bytes() == (tmp_path / "py.pcapng").read_bytes()


def test_join_names_a_file_that_is_not_a_pcap(tmp_path: Path) -> None:
    (tmp_path / "ok.pcap").write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 200, 1))
    (tmp_path / "bad.pcap").write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(40))
    (tmp_path / "short.pcap").write_bytes(b"\xd4\xc3")
    parts = [("a", tmp_path / "ok.pcap"), ("b", tmp_path / "bad.pcap")]
    with pytest.raises(ValueError, match=r"bad.pcap: not a classic pcap file \(magic 0a0d0d0a\)"):
        capture.merge_pcaps(parts, tmp_path / "m.pcapng")
    with pytest.raises(ValueError, match=r"short.pcap: not a pcap file \(only 2 bytes\)"):
        capture.merge_pcaps([("a", tmp_path / "short.pcap")], tmp_path / "m.pcapng")
    with pytest.raises(FileNotFoundError, match=r"gone\.pcap"):
        capture.merge_pcaps([("a", tmp_path / "gone.pcap")], tmp_path / "m.pcapng")
