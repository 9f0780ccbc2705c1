"""Campaign keys of cross traffic (paths[].cross_traffic) and shared bottlenecks
(shared_bottleneck): every bad value is one error naming the file, the line and the key;
campaigns without them keep every earlier run id."""

from __future__ import annotations

import pytest

from mprig.campaign import plan
from mprig.campaign.spec import parse_campaign
from mprig.errors import SpecError

HEAD = """\
name: t
paths:
  - name: wifi
    kind: wired
    rate_mbit: 20
"""
TAIL = """\
  - name: cell
    kind: wired
    rate_mbit: 20
variants:
  - name: mptcp
"""


def problems(flow_lines: str, tail: str = "") -> list[tuple[int, str, str]]:
    """(line, field, message) of every problem of a campaign whose first path gets
    `flow_lines` as its cross_traffic list (line 7 is the first flow) and `tail` at the end."""
    text = HEAD + "    cross_traffic:\n" + flow_lines + TAIL + tail
    with pytest.raises(SpecError) as exc:
        parse_campaign(text, "x.yaml")
    out = []
    for line in str(exc.value).splitlines():
        assert line.startswith("x.yaml:"), line
        _, number, rest = line.split(":", 2)
        field, _, message = rest.strip().partition(": ")
        out.append((int(number), field, message))
    return out


FIELD = "paths.wifi.cross_traffic[0]"


@pytest.mark.parametrize(
    ("flow", "want"),
    [
        ("{kind: sctp}", (7, f"{FIELD}.kind", "must be 'tcp' or 'udp'")),
        ("{kind: udp}", (7, FIELD, "a udp flow needs rate_mbit")),
        ("{kind: udp, rate_mbit: 0}", (7, f"{FIELD}.rate_mbit", "must be greater than 0")),
        ("{kind: udp, rate_mbit: 200000}", (7, f"{FIELD}.rate_mbit", "less than or equal")),
        ("{kind: udp, rate_mbit: 5, cc: reno}", (7, FIELD, "cc is for tcp flows")),
        ("{kind: tcp, rate_mbit: 5}", (7, FIELD, "rate_mbit is for udp flows")),
        ("{kind: tcp, cc: 'reno; reboot'}", (7, f"{FIELD}.cc", "must be a lower-case letter")),
        ("{kind: tcp, cc: Reno}", (7, f"{FIELD}.cc", "must be a lower-case letter")),
        ("{kind: tcp, start_s: -1}", (7, f"{FIELD}.start_s", "greater than or equal to 0")),
        ("{kind: tcp, start_s: 5, stop_s: 5}", (7, FIELD, "stop_s (5) must be after start_s")),
        ("{kind: tcp, stop_s: 0}", (7, f"{FIELD}.stop_s", "must be greater than 0")),
        ("{kind: tcp, on_s: 1}", (7, FIELD, "on_s and off_s go together")),
        ("{kind: tcp, on_s: 1, off_s: 0.01}", (7, f"{FIELD}.off_s", "or equal to 0.1")),
        ("{kind: tcp, on_s: .nan, off_s: 1}", (7, f"{FIELD}.on_s", "must be a finite number")),
        ("{kind: tcp, direction: sideways}", (7, f"{FIELD}.direction", "must be 'download'")),
        ("{kind: tcp, colour: red}", (7, f"{FIELD}.colour", "unknown key; allowed: kind, cc")),
    ],
)  # fmt: skip
def test_a_bad_flow_is_one_error_at_its_line(flow: str, want: tuple[int, str, str]) -> None:
    ((line, field, message),) = problems(f"      - {flow}\n")
    assert (line, field) == want[:2]
    assert want[2] in message, message


def test_a_flow_on_a_later_line_is_named_there() -> None:
    lines = "      - {kind: tcp}\n      - kind: udp\n        rate_mbit: -2\n"
    assert problems(lines) == [
        (9, "paths.wifi.cross_traffic[1].rate_mbit",
         "must be greater than 0, got -2 (allowed: > 0 and <= 100000: 100 Gbit/s is beyond"
         " any link a rig or netem carries)"),
    ]  # fmt: skip


def test_at_most_eight_flows_a_path() -> None:
    ((line, field, message),) = problems("      - {kind: tcp}\n" * 9)
    assert (line, field) == (6, "paths.wifi.cross_traffic")  # the list's own line
    assert message.startswith("must have at most 8 items, got "), message


BOTTLENECK_LINE = 13  # the shared_bottleneck mapping below, after one flow
B = "shared_bottleneck"


@pytest.mark.parametrize(
    ("mapping", "want"),
    [
        ("{paths: [wifi], rate_mbit: 10}", (f"{B}.paths", "must have at least 2 items")),
        ("{paths: [wifi, lte], rate_mbit: 10}", (f"{B}.paths", "no path named 'lte'")),
        ("{paths: [wifi, wifi], rate_mbit: 10}", (f"{B}.paths", "names a path twice")),
        ("{paths: [wifi, cell]}", (f"{B}.rate_mbit", "required key missing")),
        ("{paths: [wifi, cell], rate_mbit: -1}", (f"{B}.rate_mbit", "must be greater than 0")),
        ("{paths: [wifi, cell], rate_mbit: 5, delay_ms: 20000}", (f"{B}.delay_ms", "<= 10000")),
        ("{paths: [wifi, cell], rate_mbit: 5, limit_pkts: 0}", (f"{B}.limit_pkts", ">= 1")),
        ("{paths: [wifi, cell], rate_mbit: 5, aqm: red}", (f"{B}.aqm", "allowed: paths,")),
    ],
)  # fmt: skip
def test_a_bad_shared_bottleneck_is_one_error_at_its_line(
    mapping: str, want: tuple[str, str]
) -> None:
    ((line, field, message),) = problems("      - {kind: tcp}\n", f"shared_bottleneck: {mapping}\n")
    assert (line, field) == (BOTTLENECK_LINE, want[0])
    assert want[1] in message, message


def test_every_problem_of_a_file_is_listed() -> None:
    found = problems(
        "      - {kind: udp}\n      - {kind: tcp, on_s: 1}\n",
        "shared_bottleneck: {paths: [wifi, lte], rate_mbit: 10}\n",
    )
    assert [(line, field) for line, field, _ in found] == [
        (7, "paths.wifi.cross_traffic[0]"),
        (8, "paths.wifi.cross_traffic[1]"),
    ]  # the bottleneck's names are checked once the paths are valid


def test_a_valid_campaign_keeps_its_keys_and_defaults() -> None:
    text = HEAD + "    cross_traffic:\n      - {kind: udp, rate_mbit: 2, on_s: 1, off_s: 2}\n"
    c = parse_campaign(text + TAIL + "shared_bottleneck: {paths: [cell, wifi], rate_mbit: 8}\n")
    (flow,) = c.paths[0].cross_traffic
    assert (flow.kind, flow.rate_mbit, flow.on_s, flow.off_s, flow.start_s, flow.stop_s) == (
        "udp", 2, 1, 2, 0, None)  # fmt: skip
    assert (flow.congestion, flow.direction) == ("", None)
    b = c.shared_bottleneck
    assert b is not None and (b.paths, b.rate_mbit, b.delay_ms, b.limit_pkts) == (
        ("cell", "wifi"), 8, 0, 1000)  # fmt: skip


def test_without_the_new_keys_run_ids_and_plan_json_are_unchanged() -> None:
    """Run ids hash every parameter: an empty cross_traffic and no shared_bottleneck must
    hash (and print) as before the keys existed."""
    c = parse_campaign(HEAD + TAIL, "x.yaml")
    (run,) = plan.expand(c)
    doc = plan.run_json(run)
    assert ("cross_traffic" in doc["paths"][0], "shared_bottleneck" in doc) == (False, False)
    with_keys = parse_campaign(
        HEAD + "    cross_traffic: [{kind: tcp}]\n" + TAIL
        + "shared_bottleneck: {paths: [wifi, cell], rate_mbit: 8}\n", "x.yaml")  # fmt: skip
    (other,) = plan.expand(with_keys)
    assert run.run_id != other.run_id
    assert plan.run_json(other)["shared_bottleneck"]["rate_mbit"] == 8
    assert "cross_traffic" not in plan.path_json(c.paths[0])  # what the run id hashes


def test_a_lab_rig_has_no_built_shared_bottleneck() -> None:
    found = problems(
        "      - {kind: tcp}\n",
        "rig: {inventory: inventory/lab}\nshared_bottleneck: {paths: [wifi, cell], rate_mbit: 8}\n",
    )
    assert found == [(14, "shared_bottleneck", "the virtual rig builds a shared bottleneck; a"
                      " lab's shared link is its hardware")]  # fmt: skip
