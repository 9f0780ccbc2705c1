"""Campaign keys of trace-driven links (paths[].trace) and mid-run events (timeline): every
bad value is one error naming the file, the line and the key; a trace fills its
direction's rate_mbit with its mean; campaigns without either keep their run ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from mprig.campaign import plan
from mprig.campaign.spec import Direction, parse_campaign
from mprig.errors import SpecError

ALT = Path(__file__).parents[2] / "experiments" / "traces" / "alt-4-12.trace"


def campaign(trace: str, timeline: str = "") -> str:
    return f"""\
name: t
paths:
  - name: wifi
    kind: wifi
    trace: {trace}
    up: {{rate_mbit: 20}}
  - {{name: cell, kind: cellular, rate_mbit: 10}}
variants:
  - name: mptcp
traffic: {{duration_s: 10}}
{timeline}"""


def problems(text: str) -> list[tuple[int, str, str]]:
    """(line, field, message) of every problem of a campaign text."""
    with pytest.raises(SpecError) as exc:
        parse_campaign(text, "c.yaml")
    out = []
    for line in str(exc.value).splitlines():
        name, number, rest = line.split(":", 2)
        assert name == "c.yaml", line
        field, _, message = rest.strip().partition(": ")
        out.append((int(number), field, message))
    return out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "no timestamps: an empty trace delivers nothing"),
        ("\n\n", "no timestamps: an empty trace delivers nothing"),
        ("5\n2\n", "line 2: 2 ms comes after 5 ms; timestamps must not decrease"),
        ("1\n2.5\n", "line 2: '2.5' is not a millisecond timestamp"),
        ("0\n0\n", "the last timestamp (0 ms) must be > 0 and <= a day"),
    ],
)
def test_a_bad_trace_file_is_named_at_the_trace_key(
    tmp_path: Path, content: str, message: str
) -> None:
    f = tmp_path / "x.trace"
    f.write_text(content)
    assert problems(campaign(str(f))) == [(5, "paths.wifi.trace", f"{f}: {message}")]


def test_a_missing_trace_file_is_named(tmp_path: Path) -> None:
    f = tmp_path / "none.trace"
    want = f"cannot read {f}: No such file or directory"
    assert problems(campaign(str(f))) == [(5, "paths.wifi.trace", want)]
    assert problems(campaign(str(tmp_path))) == [
        (5, "paths.wifi.trace", f"{tmp_path} is not a regular file")
    ]


def test_bad_trace_fields() -> None:
    got = problems(campaign(f"{{file: {ALT}, bin_ms: 50, direction: sideways}}"))
    assert sorted((line, field) for line, field, _ in got) == [
        (5, "paths.wifi.trace.bin_ms"),
        (5, "paths.wifi.trace.direction"),
    ]
    assert any("greater than or equal to 100" in message for *_, message in got), got


def test_the_trace_sets_its_direction_rate_to_its_mean() -> None:
    c = parse_campaign(campaign(str(ALT)), "c.yaml")
    wifi = c.paths[0]
    assert (wifi.down.rate_mbit, wifi.up.rate_mbit) == (7.998, 20)
    assert wifi.trace is not None and (wifi.trace.file, wifi.trace.bin_ms) == (str(ALT), 250)


CELL = "  - {at_s: 1, path: cell, action: "  # an event on the cellular path at 1 s, then
TIMELINE_ERRORS = [
    ("  - {at_s: 12, path: cell, action: down}\n", ("timeline[0].at_s", "12 s is not within")),
    ("  - {at_s: 9, path: cell, action: handover, gap_s: 2}\n", ("timeline[0].at_s", "11 s")),
    ("  - {at_s: 1, path: wlan, action: down}\n", ("timeline[0].path", "no path named 'wlan'")),
    (CELL + "set}\n", ("timeline[0]", "action set needs rate_mbit")),
    (CELL + "up, rate_mbit: 3}\n", ("timeline[0]", "rate_mbit belongs to action set")),
    (CELL + "walk, to_m: 5, over_s: 2}\n", ("timeline[0].action", "walk needs distance_m")),
    ("  - {at_s: 1, path: wifi, action: walk, to_m: 5}\n", ("timeline[0]", "walk needs to_m")),
    ("  - {at_s: -1, path: cell, action: down}\n", ("timeline[0].at_s", "greater than or")),
    (CELL + "jump}\n", ("timeline[0].action", "must be")),
    (CELL + "set, loss_pct: 101}\n", ("timeline[0].loss_pct", "less than or equal to 100")),
    (CELL + "down, colour: red}\n", ("timeline[0].colour", "unknown key")),
]


@pytest.mark.parametrize(("event", "want"), TIMELINE_ERRORS)
def test_each_bad_event_names_its_line_and_key(event: str, want: tuple[str, str]) -> None:
    ((line, field, message),) = problems(campaign(str(ALT), "timeline:\n" + event))
    assert (line, field) == (12, want[0]), message
    assert want[1] in message, message


def test_no_trace_or_event_where_netem_does_not_set_the_rate() -> None:
    text = campaign(str(ALT)).replace("kind: wifi\n", "kind: wifi\n    aqm: fq_codel\n")
    if "aqm" in Direction.model_fields:  # the aqm key (issue 18 part 5)
        assert problems(text) == [(6, "paths.wifi.trace", "with aqm the rate is a shaper's below"
                                   " netem; remove aqm to change it")]  # fmt: skip
    ns3 = "  - {name: air, kind: wifi, engine: ns3, distance_m: 10, rate_mbit: 54}\n"
    text = campaign(str(ALT), "timeline:\n  - {at_s: 1, path: air, action: down}\n")
    text = text.replace("variants:", ns3 + "variants:")
    ((line, field, message),) = problems(text)
    assert (line, field) == (13, "timeline[0].action") and "ns-3 engine" in message, message


def test_events_past_a_swept_duration_are_refused_at_validate(tmp_path: Path) -> None:
    from mprig.run import judge

    text = campaign(str(ALT), "timeline:\n  - {at_s: 6, path: cell, action: down}\n")
    text += "sweep:\n  axes:\n    traffic.duration_s: [10, 5]\n"
    spec = tmp_path / "c.yaml"
    spec.write_text(text)
    with pytest.raises(SpecError) as exc:
        judge.plan_file(spec)
    assert "traffic.duration_s=5" in str(exc.value), str(exc.value)
    assert "6 s is not within the traffic's 5 s" in str(exc.value), str(exc.value)


def test_run_ids_hold_without_trace_or_timeline() -> None:
    text = "name: t\npaths: [{name: a, kind: wired, rate_mbit: 10}]\nvariants: [{name: m}]\n"
    (run,) = plan.expand(parse_campaign(text, "c.yaml"))
    assert "timeline" not in plan.run_json(run)
    assert "trace" not in plan.path_json(run.paths[0])
    timed = text + "timeline: [{at_s: 1, path: a, action: down}]\n"
    (other,) = plan.expand(parse_campaign(timed, "c.yaml"))
    assert other.run_id != run.run_id
    assert plan.run_json(other)["timeline"][0]["action"] == "down"
