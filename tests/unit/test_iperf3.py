"""iperf3 --json parsing on real outputs of iperf3 3.12 under mptcpize on this machine
(tests/captures/test_iperf3/, verbatim): a 1 s MPTCP download (-R) over two rate-limited
paths, an interrupted test, and a refused connection."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collectors.iperf3 import INTERVAL_COLUMNS, parse_iperf3, receiver_bps
from collectors.textparse import ParseError

HERE = Path(__file__).parents[1] / "captures" / "test_iperf3"


def read(name: str) -> str:
    return (HERE / name).read_text()


def summary(name: str) -> tuple[object, ...]:
    r = parse_iperf3(read(name), mptcp=True)
    return (r.role, r.error, r.reverse, r.sender, r.protocol, r.num_streams, r.duration_s,
            r.start_unix, r.sent_bytes, r.sent_bps, r.received_bytes, r.received_bps,
            r.retransmits, r.congestion, r.tcp_info_scope, r.complete)  # fmt: skip


def test_download_client_is_the_receiver() -> None:
    assert summary("download_client.json") == (
        "client", None, True, False, "TCP", 1, 1.0, 1795240084.0,
        1112568, 8889192.501176, 467644, 3740680.6742350459, 101, "bbr", "first_subflow", True,
    )  # fmt: skip


def test_download_server_is_the_sender() -> None:
    assert summary("download_server.json") == (
        "server", None, True, True, "TCP", 1, 1.0, 1795240084.0,
        1112568, 8889192.501176, 0, 0.0, 101, "bbr", "first_subflow", True,
    )  # fmt: skip


def test_intervals_table() -> None:
    iv = parse_iperf3(read("download_client.json")).intervals
    assert list(iv.columns) == list(INTERVAL_COLUMNS)
    assert [tuple(r) for r in iv.astype(object).itertuples(index=False)] == [
        (0.0, 1.000126, 467644, 3740680.6584548964, pd.NA, False)
    ]


def test_receiver_bps_prefers_the_client_figure() -> None:
    client = parse_iperf3(read("download_client.json"))
    server = parse_iperf3(read("download_server.json"))
    # the sending server's sum_received is 0: it cannot stand in for the receiver
    assert (receiver_bps(client, server), receiver_bps(None, server)) == (
        3740680.6742350459, None
    )  # fmt: skip


def test_refused_connection_keeps_iperf3_error() -> None:
    assert summary("refused_client.json") == (
        "client", "unable to connect to server: Connection refused", False, True, None, None,
        None, None, None, None, None, None, None, None, "first_subflow", False,
    )  # fmt: skip


def test_interrupted_run_is_not_complete_but_keeps_intervals() -> None:
    r = parse_iperf3(read("interrupted_client.json"))
    assert (r.error, r.complete, len(r.intervals), r.tcp_info_scope) == (
        "interrupt - the client has terminated", False, 2, "connection"
    )  # fmt: skip
    server = parse_iperf3(read("interrupted_server.json"))
    assert (server.role, server.error, server.sender) == (
        "server", "the client has terminated", False
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty iperf3 output (iperf3 did not run, or was stopped before it wrote its JSON)"),
        ('{"start": {', "1: not iperf3 JSON: Expecting property name enclosed in double quotes "
         "(column 12)"),
        ("[1, 2]", "JSON without iperf3's start/intervals/end keys"),
    ],
)  # fmt: skip
def test_bad_input(text: str, message: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_iperf3(text)
    assert str(exc.value) == message


def test_stock_debian_kernel_61_under_mptcpize() -> None:
    # Debian's 6.1 kernel in the VM rig, 3 s download over 4 + 2 Mbit/s netem paths: the
    # sender's TCP_INFO retransmits (5) are the first subflow's only (tcp_info_scope)
    assert summary("vm61_download_server.json") == (
        "server", None, True, True, "TCP", 1, 3.0, 1795240527.0,
        2355800, 6233344.942468632, 0, 0.0, 5, "cubic", "first_subflow", True,
    )  # fmt: skip
    assert summary("vm61_download_client.json")[10:12] == (1965956, 5240360.60938548)


# iperf3 3.12's server JSON of two 60 s downloads at 400 ms RTT in the campaign VM
# (004-fig6b-full), TERMed by the stop stage during its end-of-test exchange: iperf3 then
# writes a second, whole document with "interrupt - the server has terminated".
STOPPED = "(iperf3 writes more when it is stopped while or after writing)"


def test_a_server_stopped_after_writing_keeps_its_first_document() -> None:
    r = parse_iperf3(read("stopped_after_writing_server.json"))
    assert (r.role, r.error, r.sender, r.sent_bytes, r.retransmits, r.complete, r.note) == (
        "server", None, True, 72351744, 372, True,
        f"read the whole JSON document at lines 1-1741; left out lines 1742-3483 {STOPPED}",
    )  # fmt: skip


def test_a_server_stopped_while_writing_keeps_its_interrupt_document() -> None:
    # the first document is cut off at 36864 bytes (line 1669), where the interrupt one starts
    r = parse_iperf3(read("stopped_while_writing_server.json"))
    assert (r.role, r.error, r.sent_bytes, r.sent_bps, r.complete, r.note) == (
        "server", "interrupt - the server has terminated", 71565312, 9475435.291013194, False,
        f"read the whole JSON document at lines 1669-3410; left out lines 1-1668 {STOPPED}",
    )  # fmt: skip


def test_one_whole_document_has_no_note() -> None:
    assert parse_iperf3(read("download_server.json") + "\n\n").note is None


def test_text_after_a_document_is_left_out_and_said() -> None:
    text = read("download_client.json").rstrip() + "\nTerminated\n"
    r = parse_iperf3(text)
    lines = text.count("\n")
    assert (r.received_bytes, r.note) == (
        467644,
        f"read the whole JSON document at lines 1-{lines - 1}; left out lines {lines}-{lines}"
        f" {STOPPED}",
    )  # fmt: skip


def test_a_server_stopped_mid_line_keeps_its_interrupt_document() -> None:
    # cut off inside a key at 36864 bytes, the interrupt document going on on the same line
    r = parse_iperf3(read("stopped_mid_line_server.json"))
    assert (r.error, r.sent_bytes, r.retransmits, r.note) == (
        "interrupt - the server has terminated", 7596208, 0,
        f"read the whole JSON document at lines 1719-3460; left out lines 1-1719 {STOPPED}",
    )  # fmt: skip
