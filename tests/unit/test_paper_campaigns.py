"""The paper campaigns (experiments/papers): they load, pair up as quick/full profiles (and a
core profile for the headline cells), use presets that exist, and every Wi-Fi path with a
distance maps to a netem rate and loss."""

from __future__ import annotations

from pathlib import Path

import pytest

from mprig.campaign import presets, wifi
from mprig.campaign.plan import expand, run_count
from mprig.campaign.spec import Campaign, Direction, axis_values, load_campaign
from mprig.stack import bpfcc

PAPERS = Path(__file__).resolve().parents[2] / "experiments" / "papers"
FILES = sorted(PAPERS.glob("*.yaml"))
STEMS = sorted({f.name.rsplit("-", 1)[0] for f in FILES})


def _load(name: str) -> Campaign:
    return load_campaign(PAPERS / name)


NO_REFERENCES = ("004-fig6b", "004-fig7")
# The core profile: the cells of each paper's headline claims, n = 5 (make papers-core)
CORE = ("000-scenario1", "000-table1", "001-cwa", "002-case-a", "002-case-b", "003-scenario1",
        "004-fig4", "004-fig7")  # fmt: skip


def test_every_campaign_of_the_issue_exists_in_both_profiles() -> None:
    assert STEMS == [
        "000-scenario1",
        "000-scenario2",
        "000-table1",
        "001-cwa",
        "002-case-a",
        "002-case-b",
        "003-scenario1",
        "003-scenario2",
        "003-scenario3",
        "003-scenario4",
        "004-fig4",
        "004-fig6a",
        "004-fig6b",
        "004-fig6c",
        "004-fig7",
    ]
    profiles = {s: ("core", "full", "quick") if s in CORE else ("full", "quick") for s in STEMS}
    assert [f.name for f in FILES] == [f"{s}-{p}.yaml" for s in STEMS for p in profiles[s]]


@pytest.mark.parametrize("stem", CORE)
def test_core_is_a_subset_of_full_at_five_repetitions(stem: str) -> None:
    """Every run of a core campaign is a run of the full campaign, shorter: same paths
    (the swept axis restricted), variants picked from full's, same references, n = 5."""
    core, full = _load(f"{stem}-core.yaml"), _load(f"{stem}-full.yaml")
    assert core.name == f"{stem}-core"
    assert [p.name for p in core.paths] == [p.name for p in full.paths]
    full_variants = {v.name: v for v in full.variants}
    assert all(full_variants[v.name] == v for v in core.variants)
    assert core.references == full.references
    assert (core.sweep is None) == (full.sweep is None)
    for axis, values in core.sweep.axes.items() if core.sweep and full.sweep else ():
        assert set(axis_values(values)) <= set(axis_values(full.sweep.axes[axis])), axis
    assert core.repetitions == 5 and core.traffic.duration_s <= full.traffic.duration_s
    traffic = {c.name: run_count(c) * c.traffic.duration_s for c in (core, full)}
    assert traffic[core.name] < traffic[full.name] / 2


@pytest.mark.parametrize("stem", STEMS)
def test_quick_and_full_share_the_setup(stem: str) -> None:
    quick, full = _load(f"{stem}-quick.yaml"), _load(f"{stem}-full.yaml")
    assert (quick.name, full.name) == (f"{stem}-quick", f"{stem}-full")
    assert quick.paths == full.paths
    assert quick.variants == full.variants[: len(quick.variants)]
    # Fig. 7 has no numbers and Fig. 6(b)'s are absolute at rates the rig scales down
    assert quick.references == full.references
    assert bool(quick.references) == (stem not in NO_REFERENCES)
    assert quick.traffic.duration_s <= 20 and quick.repetitions >= 3
    assert full.repetitions >= 5
    assert run_count(quick) <= 81 and run_count(quick) < run_count(full)


@pytest.mark.parametrize("name", [f.name for f in FILES])
def test_one_sack_setting_for_every_variant_of_a_campaign(name: str) -> None:
    """A recovery comparison must not partly measure SACK: every variant of a campaign
    runs with the same net.ipv4.tcp_sack (the preset's, or a variant sysctl)."""
    from mprig.stack import knobs

    sack = {v.name: knobs.sysctls(v)["net.ipv4.tcp_sack"] for v in _load(name).variants}
    assert len(set(sack.values())) == 1, sack


def test_mptcp_paper_rows_run_coupled_where_the_paper_did() -> None:
    """Papers 000, 001 and 004 ran coupled increase (LIA); every MPTCP variant that a
    reference of theirs can select runs a coupled cc."""
    for stem in ("000-table1", "001-cwa", "004-fig4", "004-fig6a", "004-fig6b", "004-fig7"):
        variants = _load(f"{stem}-full.yaml").variants
        coupled = {v.name: presets.coupling(v.cc) for v in variants if v.protocol == "mptcp"}
        assert "coupled" in coupled.values(), stem
    for stem in ("000-scenario1", "000-scenario2"):
        names = {v.name: presets.coupling(v.cc) for v in _load(f"{stem}-full.yaml").variants}
        assert (names["nopr_lia"], names["dsack_lia"]) == ("coupled", "coupled")


def test_full_profiles_keep_the_papers_run_lengths() -> None:
    durations = {s: _load(f"{s}-full.yaml").traffic.duration_s for s in STEMS}
    assert {s: d for s, d in durations.items() if s.startswith(("000", "003"))} == dict.fromkeys(
        [s for s in STEMS if s.startswith(("000", "003"))], 50.0
    )
    assert (durations["002-case-a"], durations["002-case-b"]) == (100.0, 100.0)
    assert [_load(f"{s}-full.yaml").repetitions for s in STEMS if s.startswith("000")] == [30] * 3


@pytest.mark.parametrize("name", [f.name for f in FILES])
def test_recovery_presets_exist_and_wifi_paths_map_to_netem(name: str) -> None:
    campaign = _load(name)
    for variant in campaign.variants:
        if variant.recovery is not None:
            assert variant.recovery in presets.RECOVERY_PRESETS
        assert presets.check_cc(variant.cc, ("reno", "cubic", *bpfcc.PROGRAMS)).available
    if not any(p.distance_m for p in campaign.paths):
        return
    seen = set()
    for run in expand(campaign):
        for path in run.paths:
            key = (path.name, path.distance_m, path.down.loss_pct)
            if path.distance_m is None or key in seen:
                continue
            seen.add(key)
            eff = wifi.effective_path(path)
            assert eff.down.rate_mbit > 0 and 0 <= eff.down.loss_pct <= 100


def test_table1_delay_differences_are_0_100_500_ms() -> None:
    campaign = _load("000-table1-quick.yaml")
    assert campaign.sweep is not None
    assert campaign.sweep.axes == {"paths.p2.delay_ms": (10, 110, 510)}
    p1, p2 = campaign.paths
    # the paper's 10 ms backbone on both; p2 adds the difference
    assert [(p.down.delay_ms, p.up.delay_ms) for p in (p1, p2)] == [(10.0, 10.0), (10.0, 10.0)]
    # Linux column: the stock kernel's recovery (D-SACK among it); NS-3 column: D-SACK
    assert {v.name: (v.recovery, v.cc) for v in campaign.variants} == {
        "mptcp": ("linux", "lia"),
        "mptcp_dsack": ("dsack", "lia"),
        "tcp_best": ("linux", "reno"),
        "tcp_best_dsack": ("dsack", "reno"),
    }


def test_fig4_buffers_in_time_become_packet_limits() -> None:
    campaign = _load("004-fig4-full.yaml")
    wifi_path, cell = campaign.paths
    # 8 Mbit/s x 80 ms and 2 Mbit/s x 2 s in 1514-byte frames
    assert (wifi_path.down.limit_pkts, cell.down.limit_pkts) == (
        round(8e6 * 0.080 / (1514 * 8)),
        round(2e6 * 2.0 / (1514 * 8)),
    )
    assert (wifi_path.down.delay_ms * 2, cell.down.delay_ms * 2) == (20.0, 150.0)
    rmem = [r.variant.rmem or 0 for r in expand(campaign) if r.variant.name == "mptcp"]
    assert (min(rmem or [0]), max(rmem or [0]), len(set(rmem))) == (50000, 1000000, 21)
    assert 370000 in rmem  # the paper's 370 KB point


# --- reports/reproduce.py: the per-paper reproduction report ------------------------------


def _short(axis: str) -> str:
    from reports.results import short_axis

    return short_axis(f"param.{axis}")


@pytest.mark.parametrize("paper", ["000", "001", "002", "003", "004"])
def test_reproduce_plans_name_real_campaigns_axes_and_variants(paper: str) -> None:
    from reports import paperplans

    plan = paperplans.PAPERS[paper]
    # every campaign file of the paper, so `mprig reproduce` runs and reports each one
    assert sorted(plan.campaigns) == [s for s in STEMS if s.startswith(f"{paper}-")]
    for comp in plan.comparisons:
        campaign = _load(f"{comp.campaign}-quick.yaml")
        assert campaign.sweep is not None
        assert comp.axis in [_short(a) for a in campaign.sweep.axes]
        assert comp.baseline in [v.name for v in campaign.variants]


def _results(rows: list[dict[str, object]]) -> object:
    import pandas as pd

    from reports.results import Results

    runs = pd.DataFrame(rows)
    return Results(root=Path("results/x"), name="x", spec={}, planned=(), runs=runs)


def test_comparison_rows_give_gain_over_the_baseline_per_axis_value() -> None:
    from reports import paperplans, reproduce

    axis = "param.paths.p2.delay_ms"
    rows = [
        {
            "run_id": "a",
            "variant": "mptcp",
            "status": "complete",
            axis: 0.0,
            "throughput_bps": 19e6,
        },
        {
            "run_id": "b",
            "variant": "tcp_best",
            "status": "complete",
            axis: 0.0,
            "throughput_bps": float("nan"),  # plain TCP: only the per-path value
            "throughput_bps.p1": 10e6,
        },
        {
            "run_id": "c",
            "variant": "mptcp",
            "status": "complete",
            axis: 500.0,
            "throughput_bps": 12e6,
        },
        {
            "run_id": "d",
            "variant": "tcp_best",
            "status": "complete",
            axis: 500.0,
            "throughput_bps": 10e6,
        },
        {"run_id": "e", "variant": "mptcp", "status": "failed", axis: 500.0, "throughput_bps": 1e6},
    ]
    comp = paperplans.PAPERS["000"].comparisons[0]
    assert reproduce.comparison_rows(_results(rows), comp) == [  # type: ignore[arg-type]
        {
            "p2.delay_ms": "0",
            "mptcp Mbit/s": "19",
            "mptcp gain %": "90",
            "tcp_best Mbit/s": "10",
        },
        {
            "p2.delay_ms": "500",
            "mptcp Mbit/s": "12",
            "mptcp gain %": "20",
            "tcp_best Mbit/s": "10",
        },
    ]


def test_render_without_results_says_how_to_run_and_lists_differences() -> None:
    from reports import paperplans, reproduce

    plan = paperplans.PAPERS["003"]
    outcomes = [reproduce.CampaignOutcome(s, "quick", None, [], "not run") for s in plan.campaigns]
    text = reproduce.render(plan, outcomes, ("reno", "bbr", "cubic"))
    assert "No results: not run. Run `mprig reproduce 003 --profile quick --run`." in text
    assert "- Co-CC (RFC 6356 LIA) (`lia`): unavailable: 'lia' is not in" in text
    assert "- FC-CC (`fully_coupled`): unavailable: 'fccc' is not in" in text
    assert "- **NoPR** (`nopr`): tcp_sack=1, tcp_dsack=0, tcp_frto=0, tcp_timestamps=0" in text
    assert "| 11g 54 | 90 |" in text and "## Setup differences" in text


def test_reproduce_refuses_an_unknown_paper_and_names_the_papers() -> None:
    from mprig.errors import UsageError
    from reports import reproduce

    with pytest.raises(UsageError, match=r"paper '009': no such paper \(papers: 000, 001, 002"):
        reproduce.reproduce("009", "quick", Path("results"), Path("/nonexistent"), run=False)


def test_finding_lines_say_whether_mptcp_falls_below_the_baseline() -> None:
    from reports import paperplans, reproduce

    comp = paperplans.PAPERS["004"].comparisons[0]
    rows = [
        {"rmem": "50000", "mptcp Mbit/s": "5.1", "mptcp gain %": "-33", "tcp_wifi Mbit/s": "7.6"},
        {"rmem": "1000000", "mptcp Mbit/s": "9.5", "mptcp gain %": "25", "tcp_wifi Mbit/s": "7.6"},
    ]
    assert reproduce.finding_lines(rows, comp) == [
        "- rmem = 50000: mptcp 5.1 Mbit/s against 7.6 Mbit/s for tcp_wifi: below it (-33 %)",
        "- rmem = 1000000: mptcp 9.5 Mbit/s against 7.6 Mbit/s for tcp_wifi: not below it (25 %)",
    ]


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_scaled_fig6b_keeps_the_buffers_meaning(profile: str) -> None:
    """Fig. 6(b) runs at a hundredth of the paper's rates (1 Gbit/s + 100 Mbit/s) with the RTT
    x 100: the links keep the paper's 10:1 ratio, and sum(rates) x RTT_max (base RTT and a
    full queue, downstream) stays 1.1 MB, so the paper's buffer sizes (250 KB, 2 MB) mean
    what they meant (2 MB = 2 x sum x RTT_max gives the paper's 7.3 ms at 1.1 Gbit/s)."""
    paths = {p.name: p for p in _load(f"004-fig6b-{profile}.yaml").paths}
    fast, slow = paths["fast"].down, paths["slow"].down
    assert (fast.rate_mbit, slow.rate_mbit) == (10.0, 1.0)

    def rtt_max_s(d: Direction) -> float:
        return 2 * d.delay_ms / 1000 + d.limit_pkts * 1514 * 8 / (d.rate_mbit * 1e6)

    rtt_max = max(rtt_max_s(fast), rtt_max_s(slow))
    assert (fast.rate_mbit + slow.rate_mbit) * 1e6 / 8 * rtt_max == pytest.approx(1.1e6, rel=0.01)
