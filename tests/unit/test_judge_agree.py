"""`mprig validate` and the planning `mprig run` does agree: on every campaign shipped in
experiments/ (papers included), on the tests' bad specs, and on generated ones (a
hypothesis fuzz over random YAML mixing valid keys, wrong types, huge numbers, control
characters and nested sweeps). validate never raises anything but SpecError, and it
accepts a spec exactly when the runner can build every run's commands from it.

MPRIG_FUZZ_EXAMPLES sets the number of generated specs (the issue's bar is 10 000;
`make test` runs the profile's 300).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mprig.campaign import plan
from mprig.campaign.spec import load_campaign, parse_campaign
from mprig.cli.main import main
from mprig.errors import MprigError, SpecError
from mprig.rig.layout import layout
from mprig.run import commands, judge

REPO = Path(__file__).parents[2]
SPECS = sorted(
    [
        *REPO.glob("experiments/*.yaml"),
        *REPO.glob("experiments/papers/*.yaml"),
        *REPO.glob("tests/unit/campaigns/*.yaml"),
    ]
)

settings.register_profile(
    "judge",
    max_examples=int(os.environ.get("MPRIG_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def runner_builds(campaign: Any) -> bool:
    """What `mprig run` computes before touching a host: the plan and every run's
    commands on the virtual rig's layout. False when it stops with mprig's own error or
    a ValueError (the runner would fail there); any other exception fails the test."""
    try:
        runs = plan.expand(campaign)
        links = layout(runs[0].paths)
        ids = [r.run_id for r in runs]
        if len(set(ids)) != len(ids):
            return False
        for run in runs:
            commands.for_run(run, links)
    except (MprigError, ValueError):
        return False
    return True


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: str(p.relative_to(REPO)))
def test_validate_and_plan_agree(spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    validated = main(["validate", str(spec)])
    planned = main(["plan", "--json", str(spec)])
    capsys.readouterr()
    try:
        campaign = load_campaign(spec)
    except SpecError:
        built = False
    else:
        built = runner_builds(campaign)
    assert (validated, planned, built) in ((0, 0, True), (2, 2, False))


# -- generated specs ----------------------------------------------------------------------

KEYS = [
    "name", "description", "rig", "paths", "variants", "sweep", "traffic", "capture",
    "repetitions", "seed", "order", "references", "kind", "down", "up", "distance_m",
    "wifi_standard", "rate_mbit", "delay_ms", "jitter_ms", "loss_pct", "reorder_pct",
    "limit_pkts", "protocol", "path", "cc", "scheduler", "path_manager", "recovery",
    "sysctls", "rmem", "wmem", "tool", "direction", "duration_s", "omit_s", "bytes",
    "enabled", "hosts", "snaplen", "mode", "axes", "start", "stop", "step", "inventory",
    "block_bytes", "interval_ms",
]  # fmt: skip
AXES = [
    "paths.wifi.rate_mbit", "paths.wifi.distance_m", "paths.cell.down.delay_ms",
    "paths.wifi.wifi_standard", "variants.cc", "variants.recovery", "variants.m.rmem",
    "variants.sysctls.net.ipv4.tcp_frto", "variants.sysctls.vm.swappiness",
    "traffic.duration_s", "traffic.omit_s", "traffic.tool", "traffic.bytes", "paths.x.y",
    "traffic.block_bytes", "traffic.interval_ms",
]  # fmt: skip
WORDS = [
    "wifi", "cell", "cellular", "wired", "11b", "11g", "mptcp", "tcp", "reno", "lia",
    "fully_coupled", "prr", "tcpdoor", "nopr", "dsack", "linux", "magic", "bulk", "iperf3",
    "blocks", "upload", "download", "zip", "cartesian", "shuffle", "kernel", "rbpm",
    "net.ipv4.tcp_sack", "net.ipv4.tcp_congestion_control", "client", "server", "virtual", "",
]  # fmt: skip

numbers = st.one_of(
    st.integers(-5, 3000),
    st.sampled_from([0, 1, 2, 6, 11, 54, 100, 140, 1000, 4096, 10**6, 10**12, 10**40]),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e3, 1e3),
)
texts = st.one_of(st.sampled_from(WORDS), st.text(max_size=12))
scalars = st.one_of(numbers, texts, st.booleans(), st.none())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS + AXES), texts), inner, max_size=4),
    ),
    max_leaves=12,
)


def base() -> dict[str, Any]:
    return {
        "name": "fuzz",
        "paths": [
            {"name": "wifi", "kind": "wifi", "rate_mbit": 54, "delay_ms": 10},
            {"name": "cell", "kind": "cellular", "rate_mbit": 10, "delay_ms": 40},
        ],
        "variants": [{"name": "m"}, {"name": "t", "protocol": "tcp", "path": "wifi"}],
        "traffic": {"duration_s": 5},
    }


# Values that are right, or nearly right, for a key: most edits stay plausible, so the
# fuzz reaches the plan and the runner's code, not only the schema.
NICE = st.sampled_from([1, 2, 5, 5.5, 6, 10, 11, 20, 54, 90, 100, 140, 300, 4096])
small = st.one_of(NICE, NICE, NICE, numbers)
PLAUSIBLE: dict[str, Any] = {
    "kind": st.sampled_from(["wifi", "cellular", "wired", "lte"]),
    "wifi_standard": st.sampled_from(["11b", "11g", "11n", None]),
    "protocol": st.sampled_from(["mptcp", "tcp"]),
    "path": st.sampled_from(["wifi", "cell", "x"]),
    "paths": st.lists(st.sampled_from(["wifi", "cell", "x"]), max_size=3),
    "cc": st.sampled_from(["cubic", "reno", "lia", "prr", "tcpdoor", "fully_coupled", "x"]),
    "recovery": st.sampled_from(["nopr", "dsack", "frto", "eifel", "linux", "prr", "magic"]),
    "path_manager": st.sampled_from(["kernel", "userspace", "rbpm", "x"]),
    "sysctls": st.dictionaries(
        st.sampled_from(["net.ipv4.tcp_sack", "net.ipv4.tcp_rmem", "vm.swappiness", "a\nb"]),
        st.one_of(st.sampled_from([0, 1, "1 2 3"]), texts),
        max_size=2,
    ),
    "tool": st.sampled_from(["iperf3", "bulk", "blocks"]),
    "direction": st.sampled_from(["download", "upload"]),
    "hosts": st.lists(st.sampled_from(["client", "server"]), max_size=3),
    "mode": st.sampled_from(["zip", "cartesian", "auto", "vm"]),
    "order": st.sampled_from(["sequential", "shuffle"]),
    "inventory": st.sampled_from(["virtual", "inventory/lab.example"]),
    "enabled": st.booleans(),
}


def plausible(key: Any) -> Any:
    return PLAUSIBLE.get(key, small) if isinstance(key, str) else small


AXIS_WORDS = {"wifi_standard": ["11b", "11g"], "cc": ["reno", "lia", "prr", "fully_coupled"],
              "recovery": ["nopr", "dsack", "prr", "x"],
              "tool": ["iperf3", "bulk", "blocks"]}  # fmt: skip


@st.composite
def axis_values(draw: st.DrawFn, axis: str) -> Any:
    words = AXIS_WORDS.get(axis.rsplit(".", 1)[-1])
    item = st.sampled_from(words) if words and draw(st.integers(0, 3)) else small
    if words or draw(st.integers(0, 2)):
        return draw(st.lists(item, min_size=1, max_size=4))
    return draw(st.fixed_dictionaries({"start": small, "stop": small, "step": small}))


@st.composite
def sweeps(draw: st.DrawFn) -> dict[str, Any]:
    axes = draw(st.lists(st.sampled_from(AXES), min_size=1, max_size=3, unique=True))
    sweep: dict[str, Any] = {"axes": {a: draw(axis_values(a)) for a in axes}}
    if draw(st.booleans()):
        sweep["mode"] = draw(st.sampled_from(["zip", "cartesian", "other"]))
    return sweep


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid campaign, then random edits anywhere in its tree (set, add, delete)."""
    doc: Any = base()
    if draw(st.integers(0, 3)) == 0:  # edits seldom add a key, so start from blocks at times
        doc["traffic"] = {"tool": "blocks", "block_bytes": 8192, "interval_ms": 0, "duration_s": 5}
    if draw(st.integers(0, 2)) == 0:
        doc["sweep"] = draw(sweeps())
    for _ in range(draw(st.integers(0, 3))):
        _edit(draw, doc)
    return dict(doc)


def _edit(draw: st.DrawFn, doc: dict[str, Any]) -> None:
    node: Any = doc
    for _ in range(4 if draw(st.integers(0, 4)) else draw(st.integers(0, 3))):
        children = list(node) if isinstance(node, dict) else list(range(len(node)))
        inner = [k for k in children if isinstance(node[k], dict | list) and node[k]]
        if not inner:
            break
        node = node[draw(st.sampled_from(inner))]
    if isinstance(node, dict):
        key = draw(st.one_of(st.sampled_from(KEYS), texts))
        if node and draw(st.integers(0, 9)) < 8:
            key = draw(st.sampled_from(sorted(node, key=str)))
        roll = draw(st.integers(0, 9))
        if roll == 0:
            node.pop(key, None)
        else:
            node[key] = draw(values if roll == 1 else plausible(key))
    elif node and draw(st.integers(0, 3)) == 0:
        node[draw(st.integers(0, len(node) - 1))] = draw(values)


def judged(text: str) -> bool:
    """validate's verdict: True (valid) or False (SpecError); anything else propagates."""
    try:
        judge.plan_campaign(parse_campaign(text, "fuzz.yaml"))
    except SpecError as e:
        assert all("\n" not in str(one) and "\x1b" not in str(one) for one in e.errors)
        return False
    return True


@settings(settings.get_profile("judge"))
@given(specs())
def test_validate_never_crashes_and_agrees_with_the_runner(doc: dict[str, Any]) -> None:
    text = yaml.safe_dump(doc, allow_unicode=False, sort_keys=False)
    valid = judged(text)
    try:
        campaign = parse_campaign(text, "fuzz.yaml")
    except SpecError:
        assert not valid
        return
    assert valid == runner_builds(campaign)
