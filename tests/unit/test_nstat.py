"""nstat parsing and deltas, on real snapshots (tests/captures/test_nstat/, verbatim): text
ones of the receiver of an MPTCP download in namespaces on this machine (bundles recorded
before `nstat --json`), and one snapshot as both text and `nstat --json`
(make_json_snapshot.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.nstat import delta, parse_nstat, run_deltas, select
from collectors.textparse import ParseError

HERE = Path(__file__).parents[1] / "captures" / "test_nstat"
BEFORE = (HERE / "receiver_before.txt").read_text()
AFTER = (HERE / "receiver_after.txt").read_text()
ONE_TCP_TEXT = (HERE / "one_tcp_connection.txt").read_text()
ONE_TCP_JSON = (HERE / "one_tcp_connection.json").read_text()


def test_json_and_text_of_one_snapshot_read_alike() -> None:
    counters = parse_nstat(ONE_TCP_JSON)
    assert counters == parse_nstat(ONE_TCP_TEXT)
    assert (len(counters), next(iter(counters))) == (390, "IpInReceives")
    assert select({k: v for k, v in counters.items() if v}) == {
        "TcpExtTW": 1, "TcpExtTCPPureAcks": 20, "TcpExtTCPBacklogCoalesce": 4,
        "TcpExtTCPRcvCoalesce": 11, "TcpExtTCPFromZeroWindowAdv": 2,
        "TcpExtTCPToZeroWindowAdv": 2, "TcpExtTCPOrigDataSent": 24, "TcpExtTCPDelivered": 25,
    }  # fmt: skip


def test_parse_reads_every_counter_in_order() -> None:
    counters = parse_nstat(AFTER)
    assert (len(counters), next(iter(counters)), counters["MPTcpExtOFOQueue"]) == (
        393, "IpInReceives", 287
    )  # fmt: skip


def test_run_deltas_keep_mptcp_and_tcpext_nonzero_as_recorded() -> None:
    nonzero = {k: v for k, v in run_deltas(BEFORE, AFTER).items() if v}
    assert nonzero == {
        "TcpExtTW": 1, "TcpExtDelayedACKs": 2, "TcpExtTCPPureAcks": 13,
        "TcpExtTCPLossProbes": 1, "TcpExtTCPRcvCoalesce": 241, "TcpExtTCPOFOQueue": 302,
        "TcpExtTCPFromZeroWindowAdv": 314, "TcpExtTCPOrigDataSent": 10,
        "TcpExtTCPDelivered": 14,
        "MPTcpExtMPCapableSYNTX": 2, "MPTcpExtMPCapableSYNACKRX": 2,
        "MPTcpExtMPJoinSynAckRx": 2, "MPTcpExtMPJoinSynTx": 2,
        "MPTcpExtOFOQueueTail": 260, "MPTcpExtOFOQueue": 287, "MPTcpExtOFOMerge": 233,
        "MPTcpExtMPFastcloseTx": 2, "MPTcpExtMPRstTx": 2,
        "MPTcpExtSndWndShared": 6, "MPTcpExtRcvWndShared": 248,
    }  # fmt: skip


def test_delta_counts_new_counters_from_zero_and_select_filters() -> None:
    d = delta({"TcpExtA": 5, "IpX": 1}, {"TcpExtA": 7, "IpX": 1, "MPTcpExtB": 3})
    assert (d, select(d)) == (
        {"TcpExtA": 2, "IpX": 0, "MPTcpExtB": 3}, {"TcpExtA": 2, "MPTcpExtB": 3}
    )  # fmt: skip


def test_counter_going_down_is_an_error() -> None:
    with pytest.raises(ParseError) as exc:
        run_deltas(AFTER, BEFORE)
    assert str(exc.value) == (
        "counter IpInReceives went down from 724 to 0: snapshots swapped, or taken on "
        "different hosts or boots"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("#kernel\nTcpExtA 1 0.0\nTcpExtB x 0.0\n", "3: not an nstat counter line (name value "
         "rate): 'TcpExtB x 0.0'"),
        ("", "no counters (expected `nstat -az` output)"),
        ("<html>", "1: not an nstat counter line (name value rate): '<html>'"),
    ],
)  # fmt: skip
def test_bad_text_input(text: str, message: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_nstat(text)
    assert str(exc.value) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"kernel": {}}', 'no counters (expected `nstat --json` output: {"kernel": {...}})'),
        ('{"ifaces": {}}', 'no counters (expected `nstat --json` output: {"kernel": {...}})'),
        ('{"kernel": {"TcpExtA": 1,\n "TcpExtB": "7"}}', "counter TcpExtB: '7' is not a count"),
        ('{"kernel": {"TcpExtA": -1}}', "counter TcpExtA: -1 is not a count"),
        ('{"kernel": {"TcpExtA": true}}', "counter TcpExtA: True is not a count"),
        ('{"kernel": {"TcpExtA": 1,\n', "2: not JSON (Expecting property name enclosed in "
         "double quotes): expected `nstat --json` output"),
    ],
)  # fmt: skip
def test_bad_json_input(text: str, message: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_nstat(text)
    assert str(exc.value) == message
