"""Paper references: every shipped file loads, bad files fail with file:line, and checks
give within / outside / not comparable with the reason."""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
import report_synth as rs

from mprig.errors import SpecError
from reports import references as refs
from reports import refmatch, refspec, refstats, results
from reports.tables import fmt, sig


@cache
def shipped() -> dict[str, refspec.Entry]:
    return refspec.load_all()


def test_every_shipped_reference_loads() -> None:
    entries = shipped()
    per_paper = Counter(e.paper.id for e in entries.values())
    # 000: Table I 6, Tables III+IV 48, text 10; 003: Tables III+IV 120, text 17; ...
    assert dict(per_paper) == {"000": 64, "001": 3, "002": 10, "003": 137, "004": 23}


@pytest.mark.parametrize(
    ("ref_id", "value", "unit", "scale"),
    [
        ("000-t3-50m-prr-ooo-bo", 442, "KB", 1 / 1024),
        ("000-t4-pdr0.9-dsack-lu", 20.58, "%", 100),
        ("000-t1-ns3-500ms", 20, "%", 1.0),
        ("003-t3-s4-frto-fc", 30.3, "%", 100),
        ("003-t4-s3-dsack-un", 140.8, "KB", 1 / 1024),
        ("002-a-rbpm-bytes", 1114986, "B/s", 0.125),
        ("004-rcvbuf-3g-wifi", 375, "KB", 0.001),
    ],
)
def test_transcribed_values(ref_id: str, value: float, unit: str, scale: float) -> None:
    ref = shipped()[ref_id].ref
    assert (ref.value, ref.unit, ref.scale) == (value, unit, pytest.approx(scale))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    return path


HEADER = (
    "paper: {id: '000', title: T}\ntolerance: t\n"
    "tolerances: {t: {rel: 0.5, basis: reading, why: read off a figure}}\nreferences:\n"
)


def test_unknown_key_is_rejected_with_file_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + "- id: aaa-1\n  source: s\n  metric: m\n  unit: u\n  value: 1\n  colour: red\n",
    )
    with pytest.raises(SpecError) as e:
        refspec.load_file(path)
    assert str(e.value) == f"{path}:10: references.0.colour: Extra inputs are not permitted"


def test_a_papers_id_under_its_old_name_seed_still_loads(tmp_path: Path) -> None:
    """Reference files written before issue 20 part 3, users' own among them, name the
    paper's id `seed`."""
    old = HEADER.replace("{id: '000'", "{seed: '000'")
    path = write(tmp_path, old + "- id: aaa-1\n  source: s\n  metric: m\n  unit: u\n  value: 1\n")
    assert [e.paper.id for e in refspec.load_file(path)] == ["000"]


def test_a_tolerance_gives_one_width_and_its_reason(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "paper: {id: '000', title: T}\ntolerance: t\ntolerances:\n"
        "  t: {abs: 1, rel: 0.1, basis: reading, why: read off a figure}\nreferences:\n"
        "- id: aaa-1\n  source: s\n  metric: m\n  unit: u\n  value: 1\n",
    )
    with pytest.raises(SpecError) as e:
        refspec.load_file(path)
    assert str(e.value) == (
        f"{path}:4: tolerances.t: Value error, give exactly one of abs, rel or spread"
    )
    path.write_text(path.read_text().replace("abs: 1, rel: 0.1, basis: reading, ", "rel: 0.1, "))
    with pytest.raises(SpecError, match=r"x.yaml:4: tolerances.t.basis: Field required"):
        refspec.load_file(path)


def test_a_reference_names_a_declared_tolerance(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + "- id: aaa-1\n  source: s\n  metric: m\n  unit: u\n  value: 1\n"
        "  tolerance: wide\n",
    )
    with pytest.raises(SpecError, match=r"tolerance 'wide' is not in tolerances \(t\)"):
        refspec.load_file(path)


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    body = HEADER + "- id: aaa-1\n  source: s\n  metric: m\n  unit: u\n  value: 1\n"
    (tmp_path / "a.yaml").write_text(body)
    (tmp_path / "b.yaml").write_text(body)
    with pytest.raises(
        SpecError, match=r"b.yaml:5: id: duplicate reference id 'aaa-1', first at .*a.yaml:5"
    ):
        refspec.load_all(tmp_path)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> results.Results:
    root = tmp_path_factory.mktemp("refs") / "r"
    s = rs.Synth(
        distances=(10.0, 50.0, 70.0),
        timeseries=False,
        failed=tuple(f"dsack-d70-r{i}" for i in range(1, 6)),
    )
    return results.load(rs.write(root, s))


def checks(res: results.Results, ids: list[str]) -> dict[str, refs.Check]:
    return {c.id: c for c in refs.check(res, shipped(), ids)}


def entry(tolerance: refspec.Tolerance | None = None, **fields: object) -> refspec.Entry:
    """A reference built in the test (the synthetic campaign's variants are uncoupled)."""
    ref = refspec.Reference.model_validate({"id": "t-ref", "source": "s", "unit": "u", **fields})
    tol = tolerance or refspec.Tolerance(abs=5, basis="reading", why="a test's own window")
    return refspec.Entry(ref, refspec.Paper(id="000", title="T"), tol, "x.yaml:1")


def test_ours_is_the_mean_of_per_repetition_values() -> None:
    res = paper_results("000-scenario1-full")
    (c,) = refs.check(res, shipped(), ["000-t3-50m-nopr-ooo-r"])
    done = res.complete
    rows = done[(done["variant"] == "nopr_lia") & (done["param.paths.wifi1.distance_m"] == 50)]
    per_rep = rows.groupby("repetition")["ooo_ratio"].mean() * 100
    assert (c.ours, c.n) == (pytest.approx(float(per_rep.mean())), 5)
    assert (c.low, c.high) == (
        pytest.approx(float(per_rep.mean()) - refstats._t(5) * per_rep.std() / math.sqrt(5)),
        pytest.approx(float(per_rep.mean()) + refstats._t(5) * per_rep.std() / math.sqrt(5)),
    )
    # healthy synthetic OOO-R is about 10 % against the paper's 5.8 %, SD about 1 point
    assert c.verdict == "contradicted"


@pytest.mark.parametrize(
    ("ref_id", "reason"),
    [
        (
            "000-t3-50m-prr-lu",
            "coupled congestion control (prr_lia) not available on this kernel "
            "(6.1.0-56-amd64); available: cubic reno",
        ),
        (
            "003-t3-s1-tcpdoor-co",
            "coupled congestion control (door_lia) not available on this kernel "
            "(6.1.0-56-amd64); available: cubic reno",
        ),
        (
            "003-t3-s1-nopr-co",
            "coupled congestion control (lia) not available on this kernel "
            "(6.1.0-56-amd64); available: cubic reno",
        ),
        (
            "000-t1-linux-0ms",
            "no run matches conditions (delay_diff_ms=0, protocol=mptcp, recovery=linux, "
            "coupling=coupled)",
        ),
        (
            "004-f6c-symmetric",
            "condition 'mechanisms' is neither a sweep axis nor a variant or path field here",
        ),
        ("002-a-rbpm-packets", "metric goodput_pps missing: not collected for this campaign"),
        ("no-such-ref", "no such reference in reports/references"),
        (
            "000-t3-50m-nopr-lu",
            "no run matches conditions (distance_m=50, recovery=nopr, protocol=mptcp, "
            "coupling=coupled)",
        ),
        ("003-text-s2-*", "no reference id matches in reports/references"),
    ],
)
def test_not_comparable_says_why(synth: results.Results, ref_id: str, reason: str) -> None:
    c = checks(synth, [ref_id])[ref_id]
    assert (c.verdict, c.reason, c.ours) == ("not comparable", reason, None)


def test_failed_runs_are_not_comparable_with_their_reason(synth: results.Results) -> None:
    e = entry(conditions={"recovery": "dsack", "distance_m": 70}, metric="ooo_ratio", value=1)
    (c,) = refs.check(synth, {"t-ref": e}, ["t-ref"])
    assert (c.verdict, c.reason) == (
        "not comparable",
        "all 5 matching runs failed: iperf3 on client: connection refused after 3 attempts",
    )


def test_fixed_path_settings_match_when_not_swept(synth: results.Results) -> None:
    """The synthetic wifi path is 11g with a 5 ms delay: conditions on them match its runs
    (the cellular path has no wifi_standard, so it does not constrain)."""
    facts = refmatch.run_facts(synth)
    assert len(refmatch.match(facts, {"wifi_standard": "11g", "variant": "nopr"})) == 15
    assert len(refmatch.match(facts, {"wifi_standard": "11b"})) == 0
    assert len(refmatch.match(facts, {"delay_ms": [5, 30]})) == 30
    assert len(refmatch.match(facts, {"delay_ms": 5})) == 0  # the cellular path has 30 ms
    assert set(facts["coupling"]) == {"uncoupled"}  # cc cubic
    assert set(facts["delay_diff_ms"]) == {25.0}


def test_unrecorded_congestion_controls_give_a_hint(tmp_path: Path) -> None:
    res = results.load(rs.write(tmp_path / "r", rs.Synth(timeseries=False, available_cc=None)))
    c = checks(res, ["003-t3-s1-nopr-co"])["003-t3-s1-nopr-co"]
    assert c.reason == (
        "no run matches conditions (distance_m=10, recovery=nopr, cc=lia, protocol=mptcp, "
        "coupling=coupled); needs coupled congestion control (lia), and run.json does not "
        "record net.ipv4.tcp_available_congestion_control"
    )


def test_gain_pct_is_a_ratio_of_means_with_n_per_side(synth: results.Results) -> None:
    e = entry(
        conditions={"recovery": "dsack", "distance_m": 10},
        relative_to={"recovery": "nopr", "distance_m": 10},
        relation="gain_pct",
        metric="throughput_bps",
        unit="%",
        value=-20,
    )
    (c,) = refs.check(synth, {"t-ref": e}, ["t-ref"])
    near = synth.complete[synth.complete["param.paths.wifi.distance_m"] == 10]
    mean = near.groupby("variant")["throughput_bps"].mean()
    gain = (mean["dsack"] / mean["nopr"] - 1) * 100
    assert (c.ours, c.n, c.n_base) == (pytest.approx(gain), 5, 5)
    assert c.low < gain < c.high and c.window == (-25, -15)


def test_rcvbuf_rule_of_paper_004() -> None:
    wifi = {
        "name": "w",
        "kind": "wifi",
        "down": {"rate_mbit": 8, "delay_ms": 10},
        "up": {"rate_mbit": 8, "delay_ms": 10},
    }
    cell = {
        "name": "c",
        "kind": "cellular",
        "down": {"rate_mbit": 2, "delay_ms": 75},
        "up": {"rate_mbit": 2, "delay_ms": 75},
    }
    assert refmatch.rcvbuf_rule_bytes([wifi, cell]) == pytest.approx(375_000)
    assert refmatch.rcvbuf_rule_bytes([cell]) == pytest.approx(75_000)
    assert refmatch.rcvbuf_rule_bytes([wifi]) == pytest.approx(40_000)


def test_select_expands_patterns() -> None:
    entries = shipped()
    assert refspec.select(["000-t3-50m-nopr-*", "000-t3-50m-nopr-lu", "zzz"], entries) == [
        "000-t3-50m-nopr-lu",
        "000-t3-50m-nopr-ooo-bo",
        "000-t3-50m-nopr-ooo-r",
        "zzz",
    ]
    assert math.isnan(entries["000-t3-50m-nopr-lu"].tolerance.bound(12.26))  # needs our SD
    assert entries["000-t3-50m-nopr-lu"].tolerance.bound(12.26, sd=1.5) == 3.0


def test_plain_tcp_runs_get_a_throughput_from_their_path_so_gains_can_be_checked() -> None:
    import pandas as pd

    from reports.results import _derive

    runs = pd.DataFrame(
        {
            "variant": ["mptcp", "tcp", "mptcp_nocap"],
            "throughput_bps": [19e6, float("nan"), float("nan")],
            "throughput_bps.p1": [10e6, 9.5e6, 4e6],
            "throughput_bps.p2": [9e6, float("nan"), 3e6],
        }
    )
    assert _derive(runs)["throughput_bps"].tolist() == [19e6, 9.5e6, 7e6]


# --- issue 15: verdicts that can fail --------------------------------------------------------

import paper_synth as ps  # noqa: E402
import papers_digest  # noqa: E402

CAMPAIGN_FILES = sorted(p.stem for p in ps.PAPERS.glob("*-full.yaml"))


@cache
def paper_results(campaign: str, model_name: str = "healthy", reps: int = 5) -> results.Results:
    import tempfile

    models = {"healthy": ps.healthy, "collapsed": collapsed}
    root = Path(tempfile.mkdtemp(prefix=f"refs-{campaign}-")) / campaign
    return results.load(ps.write(root, campaign, models[model_name], repetitions=reps))


def collapsed(run, rng):  # type: ignore[no-untyped-def]
    """Every MPTCP run at 5 % of its configured capacity: a collapse."""
    return ps.healthy(run, rng, share=0.05 if run.variant.protocol == "mptcp" else 0.8)


@pytest.mark.parametrize("campaign", CAMPAIGN_FILES)
def test_conditions_select_exactly_one_variant_per_side(campaign: str) -> None:
    """A paper row means one method: its conditions meet the runs of one variant of the
    campaign (the D-SACK rows used to meet the plain-TCP baseline, which runs D-SACK too)."""
    res = paper_results(campaign)
    wrong = {}
    for ref_id in refspec.select(tuple(res.spec["references"]), shipped()):
        if ref_id not in shipped():
            continue  # a pattern that names no reference yet
        sides = refs.matched_variants(res, shipped()[ref_id])
        if any(len(s) > 1 for s in sides):
            wrong[ref_id] = sides
    assert wrong == {}


def test_mptcp_rows_name_the_protocol_and_the_papers_coupling() -> None:
    """Conditions on a method name the protocol; papers 000, 001 and 003 name the coupling
    their paper ran (000: coupled; 003: per column)."""
    missing = []
    for ref_id, e in shipped().items():
        conds = [e.ref.conditions, e.ref.relative_to or {}]
        for c in conds:
            method = {"recovery", "cc", "path_manager", "mechanisms"} & set(c)
            if method and "protocol" not in c:
                missing.append((ref_id, "protocol"))
            paper_coupled = e.paper.id in ("000", "003") and c.get("protocol") == "mptcp"
            if method and paper_coupled and "coupling" not in c:
                missing.append((ref_id, "coupling"))
    assert missing == []


def test_a_collapsed_run_cannot_pass_a_never_above_bound() -> None:
    res = paper_results("000-scenario2-full", "collapsed")
    got = checks(res, ["000-text-s2-nopr-max", "000-text-s2-dsack-max"])
    assert {k: c.verdict for k, c in got.items()} == {
        "000-text-s2-nopr-max": "contradicted",
        "000-text-s2-dsack-max": "contradicted",
    }
    assert "sanity floor" in got["000-text-s2-nopr-max"].reason


def test_a_capacity_floor_is_in_the_references_unit() -> None:
    """floor_capacity x the runs' capacity (bits/s) scaled like the metric: a never-above
    bound of 15 Mbit/s over 30 Mbit/s of paths has the window [7.5, 16] Mbit/s. Its floor
    was left in bits/s (7 500 000 > 16), so no sample, healthy or collapsed, could pass."""
    import numpy as np

    e = entry(metric="throughput_bps", scale=1e-6, unit="Mbit/s", value=15, kind="at_most",
              floor_capacity=0.25, tolerance=None)  # fmt: skip
    mbit = [12.0, 12.2, 11.8, 12.1, 11.9]
    runs = pd.DataFrame({"capacity_bps": 30e6, "throughput_bps": [v * 1e6 for v in mbit]})
    c = refs.judge(e, refs.Sample(np.array(mbit), runs), None)
    assert (c.window, c.verdict) == ((pytest.approx(7.5), 20.0), "reproduced"), c.reason
    collapsed = [12.0, 3.0, 11.8, 12.1, 11.9]  # one run under a quarter of the capacity
    runs["throughput_bps"] = [v * 1e6 for v in collapsed]
    c = refs.judge(e, refs.Sample(np.array(collapsed), runs), None)
    assert c.verdict == "inconclusive" and c.reason.startswith("1 of 5 runs under the sanity")
    high = entry(metric="throughput_bps", scale=1e-6, unit="Mbit/s", value=15, kind="at_most",
                 floor_capacity=0.9, tolerance=None)  # fmt: skip
    with pytest.raises(refs.NotComparable, match=r"window \[27, 20\] Mbit/s is empty"):
        refs.judge(high, refs.Sample(np.array(mbit), runs), None)


def test_every_bound_has_a_floor_or_a_ceiling() -> None:
    loose = [
        i
        for i, e in shipped().items()
        if (e.ref.kind == "at_most" and e.ref.floor is None and e.ref.floor_capacity is None)
        or (e.ref.kind == "at_least" and e.ref.ceiling is None)
    ]
    assert loose == []


def test_an_at_most_bound_without_a_floor_is_rejected(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "paper: {id: '000', title: T}\ntolerance: t\n"
        "tolerances: {t: {rel: 0.1, basis: reading, why: read off a figure}}\nreferences:\n"
        "- id: aaa-1\n  source: s\n  metric: m\n  unit: u\n  value: 1\n  kind: at_most\n",
    )
    with pytest.raises(SpecError, match=r"x.yaml:5: references.0: .*floor"):
        refspec.load_file(path)


def test_self_comparisons_are_configuration_checks_counted_apart() -> None:
    res = paper_results("004-fig4-full")
    got = checks(res, ["004-rcvbuf-3g-wifi", "004-rcvbuf-wifi-alone", "004-rcvbuf-3g-alone"])
    assert {k: c.verdict for k, c in got.items()} == dict.fromkeys(got, "configuration check")
    assert got["004-rcvbuf-3g-wifi"].reason.startswith("holds: configured 375 KB")
    from reports.report import verdict_counts

    counts = verdict_counts(got.values())
    assert counts["configuration check"] == 3 and counts["reproduced"] == 0


def test_a_window_including_no_effect_cannot_hide_a_contradiction() -> None:
    res = paper_results("003-scenario1-full")
    # OOO-R 1.8 % +- 2 SD of the synthetic runs (about 2.4 points) includes 0 %, but the
    # synthetic runs' OOO-R is about 10 %: wholly outside, so contradicted (it was called
    # uninformative before the interval was compared). TCP-DOOR's 42.1 % holds no 0.
    got = checks(res, ["003-t3-s1-nopr-un", "003-t3-s1-tcpdoor-un"])
    nopr = got["003-t3-s1-nopr-un"]
    assert nopr.window is not None and nopr.window[0] < 0 < nopr.window[1] < nopr.low
    assert (nopr.verdict, got["003-t3-s1-tcpdoor-un"].verdict) == ("contradicted", "contradicted")
    flagged = [i for i, e in shipped().items() if refs.window_includes_no_effect(e)]
    assert "004-f9-never-below-tcp" in flagged  # MPTCP equal to TCP is "never below" it


@pytest.mark.parametrize(
    ("mean", "low", "high", "n", "sd", "verdict", "n_needed"),
    [
        (10.0, 9.5, 10.5, 5, 0.4, "reproduced", None),  # CI inside [8, 12]
        (20.0, 19.0, 21.0, 5, 0.8, "contradicted", None),  # wholly above
        (11.5, 10.5, 12.5, 5, 0.8, "inconclusive", 13),  # straddles 12
        (10.0, math.nan, math.nan, 1, math.nan, "inconclusive", None),
    ],
)
def test_decide_from_the_confidence_interval(
    mean: float, low: float, high: float, n: int, sd: float, verdict: str, n_needed: int | None
) -> None:
    assert refstats.decide(mean, low, high, n, (8.0, 12.0), sd) == (verdict, n_needed)


def test_n_needed_is_the_smallest_n_whose_interval_decides() -> None:
    from scipy import stats

    _, n = refstats.decide(11.5, 10.5, 12.5, 5, (8.0, 12.0), 0.8)
    assert n is not None
    half = [float(stats.t.ppf(0.975, k - 1)) * 0.8 / math.sqrt(k) for k in (n - 1, n)]
    assert half[0] >= 0.5 > half[1]


def test_n_counts_repetitions_and_the_check_carries_its_interval() -> None:
    res = paper_results("000-table1-full")
    (c,) = refs.check(res, shipped(), ["000-t1-linux-0ms"])
    assert (c.n, c.n_base) == (5, 5)
    assert c.low < c.ours < c.high


def test_one_value_per_cell_in_a_reproduction_report() -> None:
    """The comparison table and the verdict row of Table I print the same gain."""
    from reports import paperplans, reproduce

    res = paper_results("000-table1-full")
    linux, ns3 = paperplans.PAPERS["000"].comparisons[:2]
    for comp, column, variant in ((linux, "linux", "mptcp"), (ns3, "ns3", "mptcp_dsack")):
        rows = {r[comp.axis]: r for r in reproduce.comparison_rows(res, comp)}
        for delay in (0, 100, 500):
            (c,) = refs.check(res, shipped(), [f"000-t1-{column}-{delay}ms"])
            assert rows[str(10 + delay)][f"{variant} gain %"] == reproduce.fmt_number(c.ours)


# --- every transcribed number against the digest of the papers (../shared/PAPERS.md) ------

METHODS_000 = {"NoPR": "nopr", "D-SACK": "dsack", "TCP-DOOR": "tcpdoor", "PR-R": "prr"}
METHODS_003 = {"NoPR": "nopr", "DSACK": "dsack", "Eifel": "eifel", "TCP-DOOR": "tcpdoor",
               "F-RTO": "frto"}  # fmt: skip


def _digest() -> str:
    return papers_digest.digest()


def quoted() -> dict[str, float]:
    """Reference id -> the value the digest quotes, parsed from its table lines."""
    text, out = _digest(), {}
    sections = re.split(r"^## ", text, flags=re.M)
    s000, s003, s004 = (next(p for p in sections if p.startswith(k)) for k in ("000", "003", "004"))
    table1 = re.sub(r"Linux (\d+) %, NS-3 (\d+) %", r"\1 %, \2 %", s000)
    for delay, linux, ns3 in re.findall(r"(\d+) ms: (\d+) %, (\d+) %", table1):
        out[f"000-t1-linux-{delay}ms"], out[f"000-t1-ns3-{delay}ms"] = float(linux), float(ns3)
    for tag, line in re.findall(r"- (50 m|70 m|PDR 0\.\d %): (.+)", s000):
        key = "t3-" + tag.replace(" ", "") if "m" in tag and "PDR" not in tag else None
        key = key or "t4-pdr" + tag.split()[1]
        for name, bo, r, lu in re.findall(r"([A-Za-z-]+) ([\d.]+)/([\d.]+)/([\d.]+)", line):
            m = METHODS_000[name]
            for metric, v in (("ooo-bo", bo), ("ooo-r", r), ("lu", lu)):
                out[f"000-{key}-{m}-{metric}"] = float(v)
    for table in ("III", "IV"):
        block = s003.split(f"Table {table}")[1].split("- Table")[0].split("- Text")[0]
        for name, cells in re.findall(r"- ([A-Za-z-]+) (.+)", block):
            for s, scenario in enumerate(cells.split(" | "), 1):
                for col, v in zip(("co", "un", "fc"), scenario.split("/"), strict=True):
                    out[f"003-t{3 if table == 'III' else 4}-s{s}-{METHODS_003[name]}-{col}"] = (
                        float(v)
                    )
    cpu = re.search(r"2 subflows\s+(\d+) % -> (\d+) %, 8 subflows (\d+) % -> (\d+) %", s004)
    assert cpu is not None
    out["004-f8-cpu-2sf-regular"], out["004-f8-cpu-2sf-allshortcuts"] = map(float, cpu.groups()[:2])
    out["004-f8-cpu-8sf-regular"], out["004-f8-cpu-8sf-allshortcuts"] = map(float, cpu.groups()[2:])
    return out


def test_every_table_value_is_the_digests() -> None:
    q = quoted()
    assert len(q) == 6 + 48 + 120 + 4
    assert {i: shipped()[i].ref.value for i in q} == q


def test_the_paper_000_tcp_maximum_is_15_and_the_file_says_why() -> None:
    assert "max 5 Mbit/s" in _digest() and "/ 15 Mbit/s" in _digest()  # both quoted
    assert [shipped()[i].ref.value for i in ("000-text-s1-tcp-max", "000-text-s2-tcp-max")] == [
        15,
        15,
    ]
    header = (refspec.REFERENCES_DIR / "000-alheid-prr.yaml").read_text().split("\npaper:")[0]
    assert "15 is taken" in header and "12.26 % of 54 Mbit/s" in header


def test_paper_003_coupled_and_fully_coupled_rows_meet_their_variant() -> None:
    """Each Co-CC and FC-CC row of Tables III and IV meets the variant of its method and
    coupling (FC-CC: BPF fccc; TCP-DOOR with Co-CC: cc tcpdoor_lia). The quick profile runs
    FC-CC with NoPR and D-SACK only; TCP-DOOR's FC-CC rows meet the full profile's
    tcpdoor_fccc (the test below)."""
    res = paper_results("003-scenario1-quick", reps=3)
    got = {
        ref_id: refs.matched_variants(res, entry)
        for ref_id, entry in shipped().items()
        if re.fullmatch(r"003-t[34]-s1-\w+-(co|fc)", ref_id)
    }
    cc = {"co": "lia", "fc": "fccc"}
    want = {
        f"003-t{table}-s1-{rec}-{col}": ({f"{rec}_{cc[col]}"},)
        for table in (3, 4)
        for rec in ("nopr", "dsack", "eifel", "frto", "tcpdoor")
        for col in ("co", "fc")
    }
    for table in (3, 4):
        for rec in ("eifel", "frto", "tcpdoor"):
            want[f"003-t{table}-s1-{rec}-fc"] = (set(),)
    assert got == want


@pytest.mark.parametrize("scenario", [1, 2, 3, 4])
def test_paper_003_tcpdoor_fully_coupled_rows_meet_tcpdoor_fccc(scenario: int) -> None:
    """TCP-DOOR under FC-CC is BPF door_fccc (cc tcpdoor_fccc): the rows of Tables III and IV
    meet that variant of the full campaign and no other (not fccc with another recovery)."""
    res = paper_results(f"003-scenario{scenario}-full")
    ids = [f"003-t{table}-s{scenario}-tcpdoor-fc" for table in (3, 4)]
    got = {i: refs.matched_variants(res, shipped()[i]) for i in ids}
    assert got == dict.fromkeys(ids, ({"tcpdoor_fccc"},))
    assert {shipped()[i].ref.requires.congestion_control for i in ids} == {("door_fccc",)}


# --- windows of quantities that cannot be negative -----------------------------------------

OOO_BO = {"metric": "ooo_max_bytes", "unit": "KB", "value": 106.0, "scale": 1 / 1024}
GAIN = {"metric": "throughput_bps", "unit": "%", "value": 23.0, "relation": "gain_pct",
        "relative_to": {"variant": "tcp"}}  # fmt: skip
RATIO = {"metric": "throughput_bps", "unit": "x", "value": 1.2, "relative_to": {"variant": "tcp"}}


def test_a_window_is_shown_from_0_when_the_quantity_cannot_be_negative() -> None:
    """OOO-BO was shown with the window [-1 590, 1 810] KB; a gain can be negative."""
    assert refs.shown_window(entry(**OOO_BO).ref, (-1594.84, 1806.84)) == (0.0, 1806.84)
    assert refs.shown_window(entry(**RATIO).ref, (-0.3, 2.7)) == (0.0, 2.7)  # of two rates
    assert refs.shown_window(entry(**GAIN).ref, (-2.02, 48.02)) == (-2.02, 48.02)
    assert refs.shown_window(entry(**OOO_BO).ref, (50.0, 162.0)) == (50.0, 162.0)


def test_a_verdict_row_shows_the_clipped_window_and_its_reason_reads_without_exponents() -> None:
    import numpy as np

    from reports.report import check_rows

    tol = refspec.Tolerance(spread=2, basis="measured", why="our run-to-run spread, twice")
    kb = np.array([988.5, 3100.4, 1500.0, 2600.0, 2000.0])
    c = refs.judge(entry(tol, **OOO_BO), refs.Sample(kb, pd.DataFrame()), None)
    assert c.verdict == "uninformative" and c.window is not None and c.window[0] < 0
    hi = c.window[1]
    assert c.reason == (
        f"the window [0, {sig(hi)}] KB includes the no-effect value 0: a result inside it "
        f"cannot tell the paper's effect from none; 95 % CI [{sig(c.low)}, {sig(c.high)}] "
        "straddles it, only one wholly outside decides (contradicted)"
    )
    assert check_rows([c])[0]["window"] == f"[0.00, {fmt(hi, 2)}]"


def test_clipping_at_0_leaves_every_committed_verdict_as_it_is() -> None:
    """A window that reaches below 0 holds the no-effect value 0 either way, so it stays
    uninformative unless the interval lies wholly outside it (contradicted): the clip
    changes the display, not the verdict."""
    import json

    from reports.paperplans import REPRODUCTIONS

    seen = 0
    for path in sorted(REPRODUCTIONS.glob("*/verdicts.json")):
        for c in json.loads(path.read_text())["checks"]:
            e = shipped().get(c["id"])
            if e is None or not c["window"] or c["window"][0] >= 0 or not e.ref.nonnegative:
                continue
            lo, hi = refs.shown_window(e.ref, tuple(c["window"]))
            outside = c["low"] is not None and (c["high"] < lo or c["low"] > hi)
            expected = "contradicted" if outside else "uninformative"
            assert (c["verdict"], lo <= e.ref.null_value <= hi) == (expected, True)
            seen += 1
    assert seen >= 4  # paper 000's OOO-BO rows at 70 m at least


def judged(e: refspec.Entry, values: list[float]) -> refs.Check:
    import numpy as np

    return refs.judge(e, refs.Sample(np.array(values), pd.DataFrame()), None)


SPREAD = refspec.Tolerance(spread=2, basis="measured", why="our run-to-run spread, twice")


def test_a_ci_wholly_outside_a_window_holding_no_effect_is_contradicted() -> None:
    """003-t3-s1-nopr-co: paper 1.3 %, window [0, 2.6] %, ours 47.9 [47.1, 48.7] % was
    labelled uninformative; a window holding 0 cannot make a row reproduced, but a CI
    far outside it contradicts the paper."""
    c = judged(shipped()["003-t3-s1-nopr-co"], [47.0, 47.5, 47.9, 48.3, 48.7])
    assert c.window is not None and c.window[0] < 0 < c.window[1] < 2.7
    assert (c.verdict, c.reason.split(";")[0]) == (
        "contradicted",
        f"95 % CI [{sig(c.low)}, {sig(c.high)}] wholly outside the window [0, {sig(c.window[1])}]",
    )


def test_a_ci_straddling_a_window_holding_no_effect_stays_uninformative() -> None:
    """000-t3-70m-dsack-ooo-bo: paper 106 KB, ours about 2 040 KB with an SD of about
    830 KB, so the +- 2 SD window reaches 1 770 KB and the CI (from about 1 010 KB)
    overlaps it: no verdict can come from a window that allows no effect."""
    c = judged(shipped()["000-t3-70m-dsack-ooo-bo"], [988.5, 3100.4, 1500.0, 2600.0, 2000.0])
    assert c.window is not None and c.low < c.window[1] < c.high
    assert c.verdict == "uninformative"
    assert c.reason == (
        f"the window [0, {sig(c.window[1])}] KB includes the no-effect value 0: a result "
        f"inside it cannot tell the paper's effect from none; 95 % CI [{sig(c.low)}, "
        f"{sig(c.high)}] straddles it, only one wholly outside decides (contradicted)"
    )


@pytest.mark.parametrize(
    ("values", "verdict", "ci"),
    [
        ([1.8, 2.0, 2.2, 2.0, 2.0], "uninformative", "inside it"),  # window [-4, 6] holds 0
        ([5.0, 6.0, 7.0, 6.0, 6.0], "uninformative", "straddles it"),
        ([19.0, 20.0, 21.0, 20.0, 20.0], "contradicted", "wholly outside the window [0, 6]"),
        ([math.nan, 2.0], "uninformative", ""),  # n = 1: no interval, nothing to decide
    ],
)
def test_a_window_holding_no_effect_never_reproduces_but_can_contradict(
    values: list[float], verdict: str, ci: str
) -> None:
    c = judged(entry(metric="ooo_ratio", unit="%", value=1.0), [v for v in values if v == v])
    assert (c.window, c.verdict) == ((-4.0, 6.0), verdict)
    assert (f"CI [{sig(c.low)}, {sig(c.high)}] {ci}" in c.reason) == bool(ci)


def test_a_window_without_no_effect_still_reproduces() -> None:
    c = judged(entry(metric="ooo_ratio", unit="%", value=10.0), [9.8, 10.0, 10.2, 10.0, 10.0])
    assert (c.window, c.verdict) == ((5.0, 15.0), "reproduced")


def test_no_committed_verdict_is_uninformative_with_its_ci_wholly_outside() -> None:
    import json

    from reports.paperplans import REPRODUCTIONS

    hidden = []
    for path in sorted(REPRODUCTIONS.glob("*/verdicts.json")):
        for c in json.loads(path.read_text())["checks"]:
            if c["verdict"] != "uninformative" or c["low"] is None or not c["window"]:
                continue
            lo, hi = c["window"]
            if c["high"] < lo or c["low"] > hi:
                hidden.append(c["id"])
    assert hidden == []
