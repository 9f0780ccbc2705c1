"""Campaign keys of a path's queue and loss model (aqm, jitter_dist, Gilbert-Elliott loss)
and the latency probe (traffic.ping_interval_ms): every bad value is one error naming the
file, the line and the key; the keys at their default keep every earlier run id."""

from __future__ import annotations

import pytest

from mprig.campaign import netemspec, plan
from mprig.campaign.spec import Direction, parse_campaign
from mprig.errors import SpecError

HEAD = """\
name: t
paths:
  - name: lan
    kind: wired
    rate_mbit: 10
    delay_ms: 10
"""
TAIL = """\
variants:
  - name: mptcp
"""
GE = "    ge_p_pct: 1\n    ge_r_pct: 5\n"  # a valid Gilbert-Elliott chain (lines 7 and 8)


def problems(path_lines: str, tail: str = TAIL) -> list[tuple[int | None, str, str]]:
    """(line, field, message) of every problem of a campaign whose only path gets
    `path_lines` (indented under it)."""
    with pytest.raises(SpecError) as exc:
        parse_campaign(HEAD + path_lines + tail, "q.yaml")
    text = str(exc.value)
    assert all(line.startswith("q.yaml:") for line in text.splitlines()), text
    out = []
    for line in text.splitlines():
        _, number, rest = line.split(":", 2)
        field, _, message = rest.strip().partition(": ")
        out.append((int(number), field, message))
    return out


@pytest.mark.parametrize(
    ("lines", "want"),
    [
        ("    aqm: red\n", (7, "paths.lan.aqm", "must be 'pfifo', 'fq_codel' or 'cake'")),
        ("    jitter_ms: 5\n    jitter_dist: gauss\n", (8, "paths.lan.jitter_dist", "must be")),
        ("    jitter_dist: normal\n", (7, "paths.lan.jitter_dist", "set jitter_ms > 0")),
        ("    ge_p_pct: 150\n", (7, "paths.lan.ge_p_pct", "less than or equal to 100")),
        ("    ge_p_pct: 1\n    ge_r_pct: -1\n", (8, "paths.lan.ge_r_pct", "greater than")),
        (GE + "    ge_bad_loss_pct: 101\n", (9, "paths.lan.ge_bad_loss_pct", "less than")),
        (GE + "    ge_good_loss_pct: x\n", (9, "paths.lan.ge_good_loss_pct", "valid number")),
        ("    ge_r_pct: 5\n", (7, "paths.lan.ge_r_pct", "set ge_p_pct > 0")),
        ("    ge_bad_loss_pct: 50\n", (7, "paths.lan.ge_bad_loss_pct", "set ge_p_pct > 0")),
        ("    ge_p_pct: 1\n", (7, "paths.lan.ge_p_pct", "needs ge_r_pct > 0")),
        ("    loss_pct: 1\n" + GE, (7, "paths.lan.loss_pct", "one loss model")),
        ("    down:\n      aqm: codel\n", (8, "paths.lan.down.aqm", "must be")),
    ],
)  # fmt: skip
def test_each_bad_value_names_its_line_and_key(lines: str, want: tuple[int, str, str]) -> None:
    line, field, message = want
    got = problems(lines)
    assert len(got) == 1, got
    assert got[0][:2] == (line, field)
    assert message in got[0][2]


def test_ge_loss_on_a_wifi_path_with_distance_is_refused() -> None:
    text = HEAD.replace("wired", "wifi").replace("rate_mbit: 10", "rate_mbit: 54")
    text += "    distance_m: 10\n    ge_p_pct: 1\n    ge_r_pct: 10\n" + TAIL
    with pytest.raises(SpecError) as exc:
        parse_campaign(text, "q.yaml")
    assert str(exc.value).splitlines() == [
        "q.yaml:8: paths.lan.ge_p_pct: the Wi-Fi channel model sets this path's loss (distance_m)"
    ]


def test_ns3_engine_refuses_an_aqm() -> None:
    text = HEAD.replace("wired", "wifi").replace("rate_mbit: 10", "rate_mbit: 54")
    text = text.replace(
        "    delay_ms: 10\n", "    distance_m: 10\n    engine: ns3\n    aqm: fq_codel\n"
    )
    with pytest.raises(SpecError) as exc:
        parse_campaign(text + TAIL, "q.yaml")
    assert "remove aqm (netem's)" in str(exc.value)


@pytest.mark.parametrize(
    ("value", "why"), [(5, "greater than or equal to 10"), (20000, "less than")]
)
def test_ping_interval_bounds(value: float, why: str) -> None:
    tail = TAIL + f"traffic:\n  duration_s: 5\n  ping_interval_ms: {value}\n"
    got = problems("", tail)
    assert [g[:2] for g in got] == [(11, "traffic.ping_interval_ms")]
    assert why in got[0][2]


def test_queue_keys_apply_per_direction_and_sweep() -> None:
    text = HEAD + "    aqm: pfifo\n    down:\n      aqm: cake\n" + TAIL
    text += "sweep:\n  axes:\n    paths.lan.up.aqm: [pfifo, fq_codel]\n"
    runs = plan.expand(parse_campaign(text, "q.yaml"))
    assert [(r.paths[0].down.aqm, r.paths[0].up.aqm) for r in runs] == [
        ("cake", "pfifo"),
        ("cake", "fq_codel"),
    ]


def test_queue_keys_at_their_default_keep_the_run_id() -> None:
    base = HEAD + TAIL
    explicit = HEAD + "    ge_bad_loss_pct: 100\n    ge_good_loss_pct: 0\n" + TAIL
    probe = base + "traffic:\n  ping_interval_ms: 100\n"
    ids = [plan.expand(parse_campaign(t, "q.yaml"))[0].run_id for t in (base, explicit, probe)]
    assert ids[0] == ids[1] != ids[2]
    aqm = plan.expand(parse_campaign(HEAD + "    aqm: pfifo\n" + TAIL, "q.yaml"))[0].run_id
    assert aqm != ids[0]


def test_ge_mean_loss() -> None:
    d = Direction(rate_mbit=10, ge_p_pct=5, ge_r_pct=45, ge_bad_loss_pct=50, ge_good_loss_pct=1)
    assert netemspec.ge_mean_loss_pct(d) == pytest.approx(0.1 * 50 + 0.9 * 1)
    assert netemspec.ge_mean_loss_pct(Direction(rate_mbit=10, loss_pct=3)) == 0.0
