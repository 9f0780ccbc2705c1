"""A distance walk on a lab rig's Wi-Fi path (mprig/run/labwalk.py): the runner steps the
attenuator through the channel model's dB over time, reads each step back and records it;
the radio path gets no timed netem change. A fake clock stands in for time (no timing
assertions): the steps' scheduled times and the stand-in attenuator's calls are exact."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from mprig.campaign import plan
from mprig.campaign.spec import parse_campaign
from mprig.rig.attenuator import RadioPath, StandInAttenuator, attenuation_for_distance
from mprig.rig.layout import layout
from mprig.run import labwalk, timeline
from mprig.run.run_attempt import RunFailed

SPEC = """\
name: w
paths:
  - {name: wifi, kind: wifi, rate_mbit: 54, distance_m: 10}
  - {name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40}
variants: [{name: mptcp}]
traffic: {duration_s: 8}
timeline:
  - {at_s: 1, path: wifi, action: walk, to_m: 40, over_s: 4}
  - {at_s: 2, path: cell, action: set, rate_mbit: 5}
"""


class FakeClock:
    """monotonic() and sleep() over a clock that moves only when slept."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += max(0.0, s)


def the_run() -> plan.Run:
    return plan.expand(parse_campaign(SPEC, "w.yaml"))[0]


def radios(offset: float = 0.0) -> dict[str, RadioPath]:
    return {"wifi": RadioPath(StandInAttenuator("wifi", read_offset_db=offset), physical_m=1.0)}


def test_the_walk_steps_one_db_of_the_channel_model_at_a_time() -> None:
    steps = labwalk.plan_steps(the_run(), radios())
    start, end = attenuation_for_distance(10, 1.0), attenuation_for_distance(40, 1.0)
    dbs = [s.db for s in steps]
    assert (steps[-1].t_s, steps[-1].distance_m, dbs[-1]) == (5.0, 40.0, round(end, 3))
    for s in steps:  # each step is the model's dB at the distance reached at its time
        assert s.distance_m == pytest.approx(10 + 30 * (s.t_s - 1) / 4, abs=1e-6)
        assert s.db == round(attenuation_for_distance(s.distance_m, 1.0), 3)
    moves = [round(b - a, 3) for a, b in zip([round(start, 3), *dbs[:-2]], dbs[:-1], strict=True)]
    gaps = [round(b.t_s - a.t_s, 6) for a, b in itertools.pairwise(steps)]
    assert (min(moves), min(gaps)) >= (1.0, labwalk.MIN_GAP_S)
    # near the AP the model moves faster than 4 dB/s: 250 ms steps of more than 1 dB there
    assert (moves[0] > 1.5, gaps[-3:-1], len(steps)) == (True, [0.44, 0.49], 12)


def test_the_runner_sets_each_step_reads_it_back_and_logs_its_times(tmp_path: Path) -> None:
    run, rp, clock = the_run(), radios(), FakeClock()
    with labwalk.walking(run, rp, tmp_path, clock=clock.monotonic, sleep=clock.sleep) as w:
        assert w is not None and w.finished.wait(10)  # the fake clock: the walk runs at once
    steps = labwalk.plan_steps(run, rp)
    att = rp["wifi"].attenuator
    assert isinstance(att, StandInAttenuator)
    expected = [c for s in steps for c in (("set_db", s.db), ("get_db", s.db))]
    assert att.calls == expected
    lines = [json.loads(x) for x in (tmp_path / labwalk.LOG).read_text().splitlines()]
    assert lines[0]["event"] == "start"
    changes = lines[1:]
    assert [(c["t"], c["read_db"], c["rc"], c["tool"]) for c in changes] == [
        (s.t_s, s.db, 0, "attenuator") for s in steps
    ]
    assert all(c["done"] >= c["issued"] >= c["t"] for c in changes)
    summary = timeline.summary({"attenuator": (tmp_path / labwalk.LOG).read_text()})
    assert (summary["changes"], summary["failed"], summary["late_ms"]["max"]) == (12, [], 0.0)


def test_a_read_back_mismatch_fails_the_run_naming_the_step(tmp_path: Path) -> None:
    clock = FakeClock()
    with (
        pytest.raises(RunFailed, match=r"wifi: stand-in wifi reads back .* dB after .* dB"
                      r" was set \(walk step 1 of 12, t = 1\.\d+ s, \d+\.\d+ m\)"),
        labwalk.walking(the_run(), radios(0.5), tmp_path, clock=clock.monotonic,
                        sleep=clock.sleep) as w,
    ):  # fmt: skip
        assert w is not None and w.finished.wait(10)
    lines = (tmp_path / labwalk.LOG).read_text().splitlines()
    assert [json.loads(x)["rc"] for x in lines[1:]] == [1]  # no step after the failure


def test_the_radio_paths_walk_leaves_the_timed_agents_and_others_keep_theirs() -> None:
    run = the_run()
    links = layout(run.paths)
    on_lab = timeline.schedules(run.paths, links, run.timeline, run.variant, 8, radios={"wifi"})
    virtual = timeline.schedules(run.paths, links, run.timeline, run.variant, 8)
    assert sorted(on_lab) == ["cell"]
    assert sorted(virtual) == ["ap", "cell"]  # the channel model into netem on the virtual rig
    assert on_lab["cell"] == virtual["cell"]


def test_no_walk_on_a_radio_path_means_no_steps_and_no_log(tmp_path: Path) -> None:
    run = plan.expand(parse_campaign(SPEC.split("timeline:")[0], "w.yaml"))[0]
    with labwalk.walking(run, radios(), tmp_path) as w:
        assert w is None
    assert (labwalk.plan_steps(run, radios()), list(tmp_path.iterdir())) == ([], [])


def test_a_set_on_a_radio_path_is_refused() -> None:
    spec = SPEC.replace("path: cell, action: set", "path: wifi, action: set")
    with pytest.raises(RunFailed, match=r"wifi: set on a radio path: .*attenuator"):
        labwalk.plan_steps(plan.expand(parse_campaign(spec, "w.yaml"))[0], radios())
