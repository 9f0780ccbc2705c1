"""iperf3 JSON and bulk-transfer checks, fed real iperf3 3.12 output."""

from __future__ import annotations

from pathlib import Path

import pytest

from mprig.campaign.spec import Traffic
from mprig.run import traffic

CAPTURES = Path(__file__).parent.parent / "captures" / "test_traffic"


def test_parse_iperf3_download_client() -> None:
    text = (CAPTURES / "iperf3_download_client.json").read_text()
    assert traffic.parse_iperf3(text) == traffic.Iperf3Summary(
        receiver_bps=11779331950.499966,
        sender_bps=11778678312.61698,
        retransmits=9,
        seconds=2.000241,
    )


def test_parse_iperf3_error_document() -> None:
    text = (CAPTURES / "iperf3_refused.json").read_text()
    with pytest.raises(
        ValueError, match=r"^iperf3: unable to connect to server: Connection refused$"
    ):
        traffic.parse_iperf3(text)


def test_parse_iperf3_unfinished() -> None:
    with pytest.raises(ValueError, match="test did not finish"):
        traffic.parse_iperf3('{"start": {}, "intervals": [], "end": {}}')


def test_has_mptcp_flag() -> None:
    assert traffic.has_mptcp_flag("  -m, --mptcp             use MPTCP rather than plain TCP")
    assert not traffic.has_mptcp_flag("  -1, --one-off             handle one client")


def test_timeout() -> None:
    assert traffic.timeout_s(Traffic(duration_s=5, omit_s=1)) == 21.0


def test_check_bulk() -> None:
    ok = {"bytes": 10, "sha256": "ab", "seconds": 0.1}
    assert traffic.check_bulk(ok, ok, 10) is None
    assert traffic.check_bulk(ok, {**ok, "bytes": 9}, 10) == "bulk: sent 10 received 9 of 10 bytes"
    assert (
        traffic.check_bulk(ok, {**ok, "sha256": "cd"}, 10)
        == "bulk: sha256 of received data differs from what was sent"
    )


@pytest.mark.parametrize(
    ("fields", "client_s", "span"),
    [
        # iperf3 sends for its test and omitted warm-up; the client's 1.25 s of start-up
        # before that (an emulated aqm run: 125 probe echoes where 5 s give 100) is idle
        ({"tool": "iperf3", "duration_s": 5}, 6.25, 5.0),
        ({"tool": "iperf3", "duration_s": 5, "omit_s": 2}, 8.1, 7.0),
        ({"tool": "blocks", "duration_s": 4}, 4.9, 4.0),
        # a client that ended early (its command's whole time) is never stretched
        ({"tool": "iperf3", "duration_s": 5}, 3.0, 3.0),
        # a bulk transfer ends when its bytes are through: the whole command
        ({"tool": "bulk", "duration_s": 30, "bytes": 1_000_000}, 7.5, 7.5),
    ],
)
def test_the_load_window_leaves_out_the_clients_start_up(
    fields: dict[str, object], client_s: float, span: float
) -> None:
    start, end = traffic.load_window(Traffic.model_validate(fields), client_s, 1000.0)
    assert (end, round(end - start, 6)) == (1000.0, span)


def test_the_margin_grows_with_the_paths_loss_and_stays_bounded() -> None:
    """15 s over a lossless path; over a lossy one the backoff of the exchange that ends
    the traffic (2^k - 1 s for k failed rounds, k where q^k < 1 %), at most 120 s."""
    assert traffic.margin_s(0.0) == 15.0
    assert traffic.margin_s(0.05) == 15.0 + 3.0  # two rounds: 0.05^2 < 1 %
    assert traffic.margin_s(0.35) == 15.0 + 31.0  # five rounds
    assert traffic.margin_s(0.6) == traffic.margin_s(1.0) == 120.0
    margins = [traffic.margin_s(q / 100) for q in range(101)]
    assert margins == sorted(margins) and min(margins) == 15.0 and max(margins) == 120.0
    assert traffic.timeout_s(Traffic(duration_s=50, omit_s=0), 0.35) == 96.0


def test_the_margin_reads_the_wifi_models_loss_at_each_distance() -> None:
    """003-scenario1-full: a lossless 10 m path keeps about 15 s; at 100 m, where 4 of 17
    iperf3 attempts outlasted 15 s (the model loses about half the round trips), the
    margin is the cap."""
    from mprig.campaign.plan import expand
    from mprig.campaign.spec import load_campaign

    papers = Path(__file__).resolve().parents[2] / "experiments" / "papers"
    runs = expand(load_campaign(papers / "003-scenario1-full.yaml"))
    by_distance: dict[float, float] = {}
    for run in runs:
        distance = float(run.point["paths.wifi1.distance_m"])
        by_distance[distance] = traffic.margin_s(traffic.round_trip_loss(run.paths))
    assert by_distance[10.0] <= 16.0 and by_distance[100.0] == 120.0
    ordered = [by_distance[d] for d in sorted(by_distance)]
    assert ordered == sorted(ordered)


def test_gilbert_elliott_loss_counts_like_random_loss() -> None:
    from mprig.campaign.spec import parse_campaign

    def loss_of(direction: str) -> float:
        text = f"""\
name: ge
paths:
  - {{name: p, kind: wired, rate_mbit: 10, delay_ms: 10, {direction}}}
variants:
  - {{name: tcp, protocol: tcp, path: p}}
traffic: {{tool: iperf3, duration_s: 5}}
"""
        return traffic.round_trip_loss(parse_campaign(text, "ge.yaml").paths)

    assert loss_of("loss_pct: 0") == 0.0
    ge = loss_of("ge_p_pct: 10, ge_r_pct: 40, ge_bad_loss_pct: 100")  # 20 % in the long run
    assert ge == pytest.approx(1 - 0.8**2)
    assert ge == pytest.approx(loss_of("loss_pct: 20"))
