"""Capture parsers, fed real tcpdump 4.99, ss (iproute2 6.1) and nstat output."""

from __future__ import annotations

from pathlib import Path

import pytest

from mprig import capture

CAPTURES = Path(__file__).parent.parent / "captures" / "test_capture"


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
    argv = capture.ss_sampler_argv(0.25)
    assert argv == ["bash", "-c", capture.SS_SCRIPT, "mprig-ss", "250000"]
    assert capture.ss_sampler_argv()[-1] == "100000"


def test_nstat() -> None:
    text = (
        "#kernel\n"
        "IpInReceives                    17251              0.0\n"
        "TcpExtTCPSACKReorder            12                 0.0\n"
        "MPTcpExtMPJoinSynRx             1                  0.0\n"
    )
    assert capture.parse_nstat(text) == {
        "IpInReceives": 17251,
        "TcpExtTCPSACKReorder": 12,
        "MPTcpExtMPJoinSynRx": 1,
    }


def test_tcpdump_argv() -> None:
    assert capture.tcpdump_argv("/tmp/x/client.pcap", 200) == [
        "tcpdump", "-i", "any", "-n", "-U", "-s", "200", "-w", "/tmp/x/client.pcap",
        "not", "tcp", "port", "22",
    ]  # fmt: skip
