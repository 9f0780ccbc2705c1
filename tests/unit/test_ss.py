"""ss -tinHM parsing, on real sampler output from an MPTCP download in namespaces on this
machine (tests/captures/test_ss/, verbatim: two 2-path samples and one empty sample)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collectors.ss import COLUMNS, data_subflows, parse_ss, path_summary, per_path
from collectors.textparse import ParseError

CAPTURE = Path(__file__).parents[1] / "captures" / "test_ss" / "mptcp_download_sender.txt"
T1, T2 = 1795240084.627435, 1795240084.734073
TOKEN = 0xB086227B
LINKS = {"10.55.1.1": "wifi", "10.55.2.1": "cell"}


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return parse_ss(CAPTURE.read_text())


def test_columns_and_row_count(frame: pd.DataFrame) -> None:
    assert list(frame.columns) == list(COLUMNS)
    # 4 TCP sockets + 2 MPTCP sockets in each of the two non-empty samples
    assert (len(frame), sorted(frame["time"].unique())) == (12, [T1, T2])


def test_subflow_row_whole(frame: pd.DataFrame) -> None:
    # the line: rtt:12.444/8.212 ... cwnd:27 ssthresh:138 bytes_sent:27908 bytes_retrans:532
    # bytes_acked:25560 ... unacked:2 retrans:0/1 ... minrtt:0.023 ... flags:Jec
    row = frame[(frame["time"] == T2) & (frame["peer_port"] == 33967)].iloc[0]
    assert row.to_dict() == {
        "time": T2, "netid": "tcp", "state": "ESTAB",
        "local_addr": "10.55.9.1", "local_port": 5201,
        "peer_addr": "10.55.2.1", "peer_port": 33967,
        "token": TOKEN, "cc": "bbr", "cwnd": 27, "ssthresh": 138,
        "srtt_ms": 12.444, "rttvar_ms": 8.212, "minrtt_ms": 0.023, "mss": 1448,
        "delivery_rate_bps": 891076920.0, "pacing_rate_bps": 1102707624.0,
        "bytes_sent": 27908, "bytes_acked": 25560, "bytes_received": None,
        "bytes_retrans": 532, "retrans": 1, "lost": None, "unacked": 2,
        "send_q": 1816, "notsent": None,
        "mptcp_flags": "Jec", "subflows": None,
        "write_seq": None, "snd_una": None, "rcv_nxt": None,
        "busy_ms": 80, "rwnd_limited_ms": 0, "sndbuf_limited_ms": 24,
    }  # fmt: skip


def test_mptcp_row_keeps_64_bit_sequence_numbers_exact(frame: pd.DataFrame) -> None:
    row = frame[(frame["time"] == T1) & (frame["netid"] == "mptcp")].iloc[0]
    got = (row["token"], row["subflows"], row["write_seq"], row["snd_una"], row["rcv_nxt"])
    assert got == (TOKEN, 1, 0x724ED0EC6A8A8E23, 0x724ED0EC6A87BC03, 0x3D5031EC922AB584)


def test_data_subflows_drop_the_iperf3_control_connection(frame: pd.DataFrame) -> None:
    sub = data_subflows(frame)
    got = sorted(set(zip(sub["peer_addr"], sub["peer_port"], sub["token"], strict=True)))
    assert got == [("10.55.1.1", 39982, TOKEN), ("10.55.2.1", 33967, TOKEN)]


def test_path_summary_by_hand(frame: pd.DataFrame) -> None:
    summary = path_summary(per_path(data_subflows(frame), LINKS))
    assert summary == {
        "cell": {"srtt_ms": pytest.approx((1.929 + 12.444) / 2), "cwnd_mean": 21.0,
                 "ssthresh_min": 138.0,
                 "delivery_rate_bps_mean": (3936560 + 891076920) / 2,
                 "retrans": 1.0, "acked_bps": (25560 - 6472) * 8 / (T2 - T1),
                 "samples": 2.0, "notsent_mean": 0.0, "idle_share": 0.0,
                 "rwnd_limited_share": 0.0, "sndbuf_limited_share": 24 / 80},
        "wifi": {"srtt_ms": pytest.approx((5.357 + 44.953) / 2), "cwnd_mean": 20.0,
                 "ssthresh_min": None,
                 "delivery_rate_bps_mean": (163154928 + 4037200) / 2,
                 "retrans": 15.0, "acked_bps": (46860 - 11360) * 8 / (T2 - T1),
                 "samples": 2.0, "notsent_mean": 34296 / 2, "idle_share": 0.0,
                 "rwnd_limited_share": 0.0, "sndbuf_limited_share": 0.0},
    }  # fmt: skip


def test_tcp_only_output_without_netid_column_and_human_rates() -> None:
    text = (
        "# 100.5\n"
        "ESTAB 0 0 10.0.0.1%eth1:5201 10.0.0.2:40000\n"
        "\t cubic rtt:2.5/1 cwnd:10 delivery_rate 1.5Mbps pacing_rate 20Kbps\n"
    )
    row = parse_ss(text).iloc[0]
    got = (row["netid"], row["local_addr"], row["cc"], row["srtt_ms"], row["cwnd"])
    assert (*got, row["delivery_rate_bps"], row["pacing_rate_bps"]) == (
        "tcp", "10.0.0.1", "cubic", 2.5, 10, 1.5e6, 2e4
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ESTAB 0 0 1:1 1:2\n", "1: socket line before the first '# <unix time>' header"),
        ("# now\n", "1: sample header is not '# <unix time>': '# now'"),
        ("# 1\n\t cubic cwnd:1\n", "2: an ss info line without a socket line before it"),
        ("# 1\nESTAB 0 0 1.2.3.4:1 1.2.3.5:2\n\t cwnd:x\n", "3: bad ss field cwnd:x"),
        ("# 1\ngarbage here\n", "2: not an ss socket line (netid state q q local peer): "
         "'garbage here'"),
    ],
)  # fmt: skip
def test_bad_input_names_the_line(text: str, message: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_ss(text)
    assert str(exc.value) == message
    assert str(exc.value.in_file("ss-server.txt")) == f"ss-server.txt:{message}"


def test_empty_output_is_an_empty_table() -> None:
    frame = parse_ss("# 1.0\n# 1.1\n")
    assert (len(frame), list(frame.columns), len(data_subflows(frame))) == (0, list(COLUMNS), 0)


def test_stock_debian_kernel_61_output() -> None:
    # ss from Debian's 6.1 kernel in the VM rig: cubic, integer minrtt, one empty sample
    text = (CAPTURE.parent / "vm61_download_sender.txt").read_text()
    summary = path_summary(per_path(data_subflows(parse_ss(text)), LINKS))
    assert summary == {
        "cell": {"srtt_ms": 75.5, "cwnd_mean": 28.0, "ssthresh_min": 28.0,
                 "delivery_rate_bps_mean": 2503672.0, "retrans": None, "acked_bps": None,
                 "samples": 1.0, "notsent_mean": 45120.0, "idle_share": 0.0,
                 "rwnd_limited_share": 0.0, "sndbuf_limited_share": 1.0},
        "wifi": {"srtt_ms": 84.595, "cwnd_mean": 33.0, "ssthresh_min": 30.0,
                 "delivery_rate_bps_mean": 3977488.0, "retrans": None, "acked_bps": None,
                 "samples": 1.0, "notsent_mean": 58952.0, "idle_share": 0.0,
                 "rwnd_limited_share": 0.0, "sndbuf_limited_share": 0.0},
    }  # fmt: skip


def test_fast_subflow_idle_behind_a_backlog_on_the_slow_path() -> None:
    # six real samples of the sender (server) in a 000 Table I run, recovery preset dsack,
    # the second path 500 ms longer (3.78 Mbit/s over two 10 Mbit/s paths): the 1-s path's
    # subflow holds 1.4-2.1 MB it has not sent, and the fast subflow has nothing queued in
    # 4 of the 6 samples (Send-Q 133488 and 28632 in the other two; notsent:46136 once)
    text = (CAPTURE.parent / "mptcp_hol_500ms_sender.txt").read_text()
    summary = path_summary(
        per_path(data_subflows(parse_ss(text)), {"10.1.1.2": "p1", "10.2.1.2": "p2"})
    )
    got = {p: (v["idle_share"], v["notsent_mean"]) for p, v in summary.items()}
    slow = [1910888, 1764824, 1684632, 1623056, 1418280, 2080816]
    assert got == {"p1": (pytest.approx(4 / 6), pytest.approx(46136 / 6)),
                   "p2": (0.0, pytest.approx(sum(slow) / 6))}  # fmt: skip


def test_fast_subflow_limited_by_the_connections_send_buffer() -> None:
    # the same samples: at the last one the fast subflow's kernel counts busy:6324ms
    # rwnd_limited:12ms(0.2%) sndbuf_limited:2588ms(40.9%), the slow one busy:10060ms alone
    text = (CAPTURE.parent / "mptcp_hol_500ms_sender.txt").read_text()
    summary = path_summary(
        per_path(data_subflows(parse_ss(text)), {"10.1.1.2": "p1", "10.2.1.2": "p2"})
    )
    got = {p: (v["rwnd_limited_share"], v["sndbuf_limited_share"]) for p, v in summary.items()}
    assert got == {"p1": (pytest.approx(12 / 6324), pytest.approx(2588 / 6324)),
                   "p2": (0.0, 0.0)}  # fmt: skip


def test_limited_shares_sum_a_paths_sockets_at_their_last_samples() -> None:
    """Two sockets on one path, counters cumulative: the last sample of each (not the sum
    over samples); no `busy` printed (an older ss, or a socket that never sent): null."""
    text = (
        "# 1.0\ntcp ESTAB 0 0 10.0.0.1:5201 10.0.0.2:40000\n\t cubic bytes_acked:9 busy:100ms"
        " sndbuf_limited:50ms(50.0%)\n"
        "# 2.0\ntcp ESTAB 0 0 10.0.0.1:5201 10.0.0.2:40000\n\t cubic bytes_acked:9 busy:300ms"
        " rwnd_limited:30ms(10.0%) sndbuf_limited:60ms(20.0%)\n"
        "tcp ESTAB 0 0 10.0.0.1:5201 10.0.0.2:40001\n\t cubic bytes_acked:9 busy:100ms\n"
    )
    frame = per_path(parse_ss(text), {"10.0.0.2": "p"})
    summary = path_summary(frame)["p"]
    assert (summary["rwnd_limited_share"], summary["sndbuf_limited_share"]) == (
        pytest.approx(30 / 400),
        pytest.approx(60 / 400),
    )
    silent = per_path(parse_ss("# 1.0\ntcp ESTAB 0 0 10.0.0.1:5201 10.0.0.2:40000\n\t cubic\n"),
                      {"10.0.0.2": "p"})  # fmt: skip
    assert path_summary(silent)["p"]["sndbuf_limited_share"] is None


def test_subflow_queue_counts_only_samples_after_it_carried_data() -> None:
    # before its first acknowledged byte a subflow idles by construction (joining)
    text = (
        "# 1.0\ntcp ESTAB 0 0 10.0.0.1:5201 10.0.0.2:40000\n\t cubic cwnd:10\n"
        "# 2.0\ntcp ESTAB 0 0 10.0.0.1:5201 10.0.0.2:40000\n\t cubic bytes_acked:100\n"
        "# 3.0\ntcp ESTAB 0 2000 10.0.0.1:5201 10.0.0.2:40000\n"
        "\t cubic cwnd:10 bytes_acked:900 notsent:600\n"
    )
    summary = path_summary(per_path(data_subflows(parse_ss(text)), {"10.0.0.2": "p"}))
    assert (summary["p"]["idle_share"], summary["p"]["notsent_mean"]) == (0.5, 300.0)


def test_ipv6_subflows_bound_to_a_device_keep_their_address() -> None:
    # real `ss -tinHMm` on the client of an MPTCP upload over two IPv6 paths (namespaces on
    # this machine): a subflow an endpoint opened is bound to its device, `[addr]%dev:port`
    text = (CAPTURE.parent / "mptcp_ipv6_two_paths_client.txt").read_text()
    tcp = parse_ss(text)
    tcp = tcp[tcp["netid"] == "tcp"]
    got = sorted(zip(tcp["local_addr"], tcp["local_port"], tcp["peer_addr"], strict=True))
    assert got == [
        ("fd00:1:1::2", 43555, "fd00::1"),
        ("fd00:1:1::2", 47287, "fd00::1"),
        ("fd00:2:1::2", 53331, "fd00::1"),
        ("fd00:2:1::2", 60381, "fd00::1"),
    ]
    paths = per_path(tcp, {"fd00:1:1::2": "wifi", "fd00:2:1::2": "cell"})["path"]
    assert sorted(paths) == ["cell", "cell", "wifi", "wifi"]


def test_a_stop_report_after_the_last_sample_is_not_a_socket(frame: pd.DataFrame) -> None:
    """bash reports a child killed by the runner's SIGTERM ("Terminated") on the sampler's
    output (a CI run's ss-server.txt ended so). It follows the sample whose `ss` the signal
    killed, which may be cut short: that sample is dropped, the ones before parse as they are."""
    text = CAPTURE.read_text()
    before_last = frame[frame["time"] < T2].reset_index(drop=True)
    assert parse_ss(text + "Terminated\n").equals(before_last)
    assert parse_ss(text + "Killed\n\n").equals(before_last)


def test_a_stop_report_between_samples_drops_only_the_sample_it_cut(frame: pd.DataFrame) -> None:
    """In 3 of 75 runs of a VM campaign the sampler's bash outlived the stop signal by
    seconds: "Terminated" (its `ss` killed) came mid-output, then more (empty) samples. The
    sample the report follows may be cut short, so its sockets are dropped; the rest parse."""
    text = CAPTURE.read_text()
    later = "# 1795240090.5\n# 1795240090.6\n"
    cut = text.rstrip("\n").rsplit("\n# ", 1)[0] + "\n"  # without the last sample
    last_cut = text + "# 1795240090.4\ntcp ESTAB 0 0 10.55.9.1:5201 10.5\nTerminated\n"
    assert parse_ss(text + "# 1795240090.4\nTerminated\n" + later).equals(frame)
    assert parse_ss(text.replace("\n# ", "\nKilled\n# ", 1) + later).equals(frame)
    with pytest.raises(ParseError, match="address without a port"):
        parse_ss(last_cut)  # a cut line is still an error when nothing says why
    assert parse_ss(cut + "Terminated\n").empty  # its last sample, T1, was the one cut
    with pytest.raises(ParseError, match="not an ss socket line"):
        parse_ss(text + "Terminated and more\n" + later)  # only bash's exact report
