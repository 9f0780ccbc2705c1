"""Paper references: every shipped file loads, bad files fail with file:line, and checks
give within / outside / not comparable with the reason."""

from __future__ import annotations

import math
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
import report_synth as rs

from mprig.errors import SpecError
from reports import references as refs
from reports import results


@cache
def shipped() -> dict[str, refs.Entry]:
    return refs.load_all()


def test_every_shipped_reference_loads() -> None:
    entries = shipped()
    per_paper = Counter(e.paper.seed for e in entries.values())
    # 000: Table I 6, Tables III+IV 48, text 10; 003: Tables III+IV 120, text 11; ...
    assert dict(per_paper) == {"000": 64, "001": 3, "002": 10, "003": 131, "004": 20}


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


HEADER = "paper: {seed: '000', title: T}\ntolerance: {rel: 0.5}\nreferences:\n"


def test_unknown_key_is_rejected_with_file_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + "- id: aaa-1\n  source: s\n  metric: m\n  unit: u\n  value: 1\n  colour: red\n",
    )
    with pytest.raises(SpecError) as e:
        refs.load_file(path)
    assert str(e.value) == f"{path}:9: references.0.colour: Extra inputs are not permitted"


def test_bad_tolerance_names_the_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + "- id: aaa-1\n  source: s\n  metric: m\n  unit: u\n"
        "  value: 1\n  tolerance: {abs: 1, rel: 0.1}\n",
    )
    with pytest.raises(SpecError) as e:
        refs.load_file(path)
    assert str(e.value) == (
        f"{path}:9: references.0.tolerance: Value error, give exactly one of abs or rel"
    )


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    body = HEADER + "- id: aaa-1\n  source: s\n  metric: m\n  unit: u\n  value: 1\n"
    (tmp_path / "a.yaml").write_text(body)
    (tmp_path / "b.yaml").write_text(body)
    with pytest.raises(
        SpecError, match=r"b.yaml:4: id: duplicate reference id 'aaa-1', first at .*a.yaml:4"
    ):
        refs.load_all(tmp_path)


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


def test_value_within_and_outside(synth: results.Results) -> None:
    got = checks(synth, ["000-t3-50m-nopr-ooo-r", "000-t3-50m-nopr-ooo-bo"])
    rows = synth.complete[
        (synth.complete["variant"] == "nopr")
        & (synth.complete["param.paths.wifi.distance_m"] == 50)
    ]
    ooo_r = float(rows["ooo_ratio"].mean()) * 100
    bo = float(rows["ooo_max_bytes"].mean()) / 1024
    r, b = got["000-t3-50m-nopr-ooo-r"], got["000-t3-50m-nopr-ooo-bo"]
    assert (r.ours, r.n, r.difference) == (pytest.approx(ooo_r), 5, pytest.approx(ooo_r - 5.8))
    assert r.verdict == ("within" if abs(ooo_r - 5.8) <= 5 else "outside")
    assert (b.ours, b.verdict) == (pytest.approx(bo), "outside")  # ~20 KB vs 196 KB


@pytest.mark.parametrize(
    ("ref_id", "reason"),
    [
        ("000-t3-50m-prr-lu", "no run matches conditions (distance_m=50, recovery=prr)"),
        (
            "000-t3-70m-dsack-lu",
            "all 5 matching runs failed: iperf3 on client: connection refused after 3 attempts",
        ),
        (
            "003-t3-s1-nopr-co",
            "coupled congestion control (lia) not available on this kernel "
            "(6.1.0-56-amd64); available: cubic reno",
        ),
        (
            "000-t1-linux-0ms",
            "no run matches conditions (delay_ms=0, protocol=mptcp, recovery=linux)",
        ),
        (
            "004-f6c-symmetric",
            "condition 'mechanisms' is neither a sweep axis nor a variant or path field here",
        ),
        ("002-a-rbpm-packets", "metric goodput_pps missing: not collected for this campaign"),
        ("no-such-ref", "no such reference in reports/references"),
        (
            "000-text-s1-prr-gain-gt50m",
            "no run matches conditions (recovery=prr, distance_m=[51..])",
        ),
        (
            "000-text-s1-tcpdoor-gain-le50m",
            "no run matches conditions (recovery=tcpdoor, distance_m=[..50])",
        ),
        ("003-text-s2-*", "no reference id matches in reports/references"),
    ],
)
def test_not_comparable_says_why(synth: results.Results, ref_id: str, reason: str) -> None:
    c = checks(synth, [ref_id])[ref_id]
    assert (c.verdict, c.reason, c.ours) == ("not comparable", reason, None)


def test_fixed_path_settings_match_when_not_swept(synth: results.Results) -> None:
    """The synthetic wifi path is 11g with a 5 ms delay: conditions on them match its runs
    (the cellular path has no wifi_standard, so it does not constrain)."""
    facts = refs._facts(synth)
    assert len(refs.match(facts, {"wifi_standard": "11g", "variant": "nopr"})) == 15
    assert len(refs.match(facts, {"wifi_standard": "11b"})) == 0
    assert len(refs.match(facts, {"delay_ms": [5, 30]})) == 30
    assert len(refs.match(facts, {"delay_ms": 5})) == 0  # the cellular path has 30 ms


def test_unrecorded_congestion_controls_give_a_hint(tmp_path: Path) -> None:
    res = results.load(rs.write(tmp_path / "r", rs.Synth(timeseries=False, available_cc=None)))
    c = checks(res, ["003-t3-s1-nopr-co"])["003-t3-s1-nopr-co"]
    assert c.reason == (
        "no run matches conditions (distance_m=10, recovery=nopr, cc=lia); needs coupled "
        "congestion control (lia), and run.json does not record "
        "net.ipv4.tcp_available_congestion_control"
    )


def test_relative_gain_and_bounds(synth: results.Results) -> None:
    done = synth.complete
    far = done[done["param.paths.wifi.distance_m"] > 50]
    dsack = far.loc[far["variant"] == "dsack", "throughput_bps"]
    assert dsack.empty  # every dsack run at 70 m failed: the gain is not comparable
    c = checks(synth, ["000-text-s1-dsack-gain-gt50m", "000-text-s2-nopr-max"])
    assert c["000-text-s1-dsack-gain-gt50m"].verdict == "not comparable"
    top = float(done.loc[done["variant"] == "nopr", "throughput_bps"].max()) / 1e6
    bound = c["000-text-s2-nopr-max"]
    assert (bound.ours, bound.verdict) == (
        pytest.approx(top),
        "within" if top <= 15.75 else "outside",
    )


def test_gain_pct_against_relative_to(synth: results.Results) -> None:
    entry = refs.Entry(
        refs.Reference(
            id="t-gain",
            source="s",
            conditions={"recovery": "dsack", "distance_m": 10},
            relative_to={"recovery": "nopr", "distance_m": 10},
            relation="gain_pct",
            metric="throughput_bps",
            unit="%",
            value=-20,
        ),
        refs.Paper(seed="000", title="T"),
        refs.Tolerance(abs=10),
        "x.yaml:1",
    )
    (c,) = refs.check(synth, {"t-gain": entry}, ["t-gain"])
    near = synth.complete[synth.complete["param.paths.wifi.distance_m"] == 10]
    mean = near.groupby("variant")["throughput_bps"].mean()
    gain = (mean["dsack"] / mean["nopr"] - 1) * 100
    assert (c.ours, c.n, c.verdict) == (
        pytest.approx(gain),
        10,
        "within" if abs(gain + 20) <= 10 else "outside",
    )


def test_rcvbuf_rule_of_seed_004() -> None:
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
    assert refs.rcvbuf_rule_bytes([wifi, cell]) == pytest.approx(375_000)
    assert refs.rcvbuf_rule_bytes([cell]) == pytest.approx(75_000)
    assert refs.rcvbuf_rule_bytes([wifi]) == pytest.approx(40_000)


def test_select_expands_patterns() -> None:
    entries = shipped()
    assert refs.select(["000-t3-50m-nopr-*", "000-t3-50m-nopr-lu", "zzz"], entries) == [
        "000-t3-50m-nopr-lu",
        "000-t3-50m-nopr-ooo-bo",
        "000-t3-50m-nopr-ooo-r",
        "zzz",
    ]
    assert not math.isnan(entries["000-t3-50m-nopr-lu"].tolerance.bound(12.26))


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
