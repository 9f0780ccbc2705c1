"""Bad captures: a clear message naming the file and the packet index or byte offset,
partial results flagged, no traceback (CLI exit 2 only when nothing can be read)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from collectors.analyze import analyze_pcap
from mprig.cli.main import main
from mprig.errors import UsageError

FIX = Path(__file__).resolve().parents[1] / "captures" / "test_collectors_fixtures"
REORDER = FIX / "reorder_two_subflows.pcap"


def test_truncated_file_gives_partial_results(tmp_path: Path) -> None:
    data = REORDER.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:-500])  # the last packet (P6, DSN 5001) loses its tail
    res = analyze_pcap(cut)
    assert res.partial is True
    last = len(data) - 16 - 1082  # the 13th record: 16-byte header, 1082-byte frame
    assert res.warnings == [
        f"{cut}: packet 13 (offset {last}): file ends inside a packet: truncated capture, "
        "results are partial"
    ]
    (conn,) = res.connections
    s = conn.summary()
    # P1..P5 delivered; P7 still waits for P6 in the out-of-order queue.
    assert (s["packets"], s["delivered_bytes"], s["ooo_packets"], s["ooo_max_bytes"]) == (
        6,
        5000,
        3,
        2000,
    )
    assert s["flags"]["partial"] is True


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file: no capture header at offset 0"),
        (b"GARBAGE!" * 10, "not a pcap or pcapng file: unknown magic 47415242 at offset 0"),
        (b"\xd4\xc3\xb2\xa1\x02\x00", "file ends inside the pcap header (6 bytes)"),
    ],
)
def test_unreadable_input_is_a_usage_error(tmp_path: Path, content: bytes, message: str) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(content)
    with pytest.raises(UsageError) as exc:
        analyze_pcap(bad)
    assert str(exc.value) == f"{bad}: {message}"


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nope\.pcap: cannot read the capture: No such file"):
        analyze_pcap(tmp_path / "nope.pcap")


def test_implausible_record_length_stops_with_partial(tmp_path: Path) -> None:
    data = bytearray(REORDER.read_bytes())
    struct.pack_into("<I", data, 24 + 8, 0x7FFFFFFF)  # first record's captured length
    bad = tmp_path / "corrupt.pcap"
    bad.write_bytes(bytes(data))
    res = analyze_pcap(bad)
    assert (res.partial, res.connections) == (True, [])
    assert res.warnings[0] == (
        f"{bad}: packet 1 (offset 24): record length 2147483647 is not plausible: "
        "file corrupt here, stopping"
    )


def test_snaplen_too_short_for_options() -> None:
    path = FIX / "reorder_two_subflows_snaplen64.pcap"
    res = analyze_pcap(path)
    assert res.warnings[0] == (
        f"{path}: packet 2 (offset 98): TCP options cut by the capture snaplen "
        "(30 bytes captured, header 32)"
    )
    (conn,) = res.connections
    s = conn.summary()
    assert (s["packets"], s["delivered_bytes"], s["unmapped_bytes"]) == (4, 0, 4000)
    assert (s["flags"]["capture_truncated"], s["flags"]["missing_handshake"]) == (True, True)


def test_no_mptcp_at_all() -> None:
    path = FIX / "plain_tcp.pcap"
    res = analyze_pcap(path)
    assert (res.connections, res.partial) == ([], False)
    assert res.warnings == [f"{path}: no MPTCP connection with data found (4 packets, 4 TCP)"]


def test_missing_handshake_is_flagged() -> None:
    path = FIX / "missing_handshake.pcap"
    res = analyze_pcap(path)
    msg = "MPTCP subflow without captured handshake: connection tracked from here"
    assert res.warnings[0] == f"{path}: packet 1 (offset 24): {msg}"
    assert [c.summary()["flags"]["missing_handshake"] for c in res.connections] == [True, True]


def test_join_whose_connection_handshake_was_not_captured() -> None:
    path = FIX / "join_without_connection_handshake.pcap"
    res = analyze_pcap(path)
    token = "MP_JOIN with unknown token 1d55e8c4: connection handshake not captured"
    adopted = "MPTCP subflow without captured handshake: connection tracked from here"
    assert res.warnings == [
        f"{path}: packet 1 (offset 24): {token}",
        f"{path}: packet 4 (offset 286): {adopted}",
        f"{path}: packet 7 (offset 3580): {adopted}",
    ]
    # Each subflow is tracked on its own from its first mapping.
    keys = ("connection", "packets", "delivered_bytes", "ooo_packets")
    assert [tuple(c.summary()[k] for k in keys) for c in res.connections] == [
        ("10.0.0.1:5201->10.0.1.2:40001", 4, 1000, 3),
        ("10.0.0.1:5201->10.0.2.2:40002", 3, 1000, 2),
    ]


def test_timestamps_going_backwards() -> None:
    path = FIX / "timestamps_backwards.pcap"
    res = analyze_pcap(path)
    assert res.warnings == [
        f"{path}: packet 10 (offset 3826): timestamp goes backwards by 10000000 ns; "
        "using the previous time"
    ]
    (conn,) = res.connections
    assert conn.summary()["flags"]["timestamps_backwards"] is True
    assert conn.summary()["ooo_packets"] == 3


def test_timestamp_jumping_years_ahead(tmp_path: Path) -> None:
    data = bytearray(REORDER.read_bytes())
    last = len(data) - 16 - 1082  # the 13th (last) record
    struct.pack_into("<I", data, last, 0xF0000000)  # seconds: the year 2097
    path = tmp_path / "jump.pcap"
    path.write_bytes(bytes(data))
    res = analyze_pcap(path, bin_s=0.05)
    assert res.warnings == [
        f"{path}: packet 13 (offset {last}): timestamp 2326531840 s ahead of the previous "
        "packet: a clock outlier, given the previous packet's time"
    ]
    (conn,) = res.connections
    flags = conn.summary()["flags"]
    assert (flags["timestamp_outliers"], flags["timestamp_jumps"]) == (True, False)
    # A lone packet stamped in 2097 keeps the previous packet's time: the span and the series
    # are the transfer's, not 46 billion bins (tests/unit/test_collectors_cost.py: a clock
    # that really jumps widens the bins instead).
    ts = conn.timeseries()
    assert (len(ts), conn.series_bin_s) == (int(conn.duration_s / 0.05) + 1, 0.05)


def test_cli_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"GARBAGE!")
    assert main(["analyze", str(bad)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"mprig: error: {bad}: not a pcap or pcapng file: unknown magic 47415242 at offset 0\n"
    )
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(REORDER.read_bytes()[:-500])
    assert main(["analyze", str(cut), "--json"]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    assert out.err.startswith(f"mprig: warning: {cut}: packet 13 ")
    assert '"partial": true' in out.out


def test_bad_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match=r"--k must be between 1 and 1000000 packets, got 0"):
        analyze_pcap(REORDER, k_block=0)
    with pytest.raises(SystemExit) as exc:  # an option error, from the bounded type
        main(["analyze", str(REORDER), "--bin", "0"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "mprig analyze: error: argument --bin: '0' is not a number in range; allowed: 0.001"
        " to 3600 (seconds; finer than 1 ms is below timestamp noise)"
    )


def test_captures_analyse_in_parallel_threads() -> None:
    # The compiled pass releases the GIL: threads give the same answers as one by one.
    from concurrent.futures import ThreadPoolExecutor

    files = sorted(FIX.glob("*.pcap*"))

    def brief(path: Path) -> list[tuple[int, int]]:
        res = analyze_pcap(path)
        return [(int(c.raw["delivered_bytes"]), int(c.raw["ooo_packets"])) for c in res.connections]

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(brief, files * 3)) == [brief(f) for f in files * 3]
