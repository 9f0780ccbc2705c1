"""Distance on a lab rig is the attenuator (issue 17 part 3): a Wi-Fi path with an
attenuator in the inventory gets no netem at all (the radio is the channel), and the runner
sets the attenuation of `distance_m` through the channel model's dB mapping, reads it back
and records both. The StandInAttenuator (a stand-in, not hardware) records the calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from mprig.campaign.plan import Run, expand
from mprig.campaign.spec import parse_campaign
from mprig.campaign.wifi import Radio
from mprig.errors import UsageError
from mprig.rig import inventory as I
from mprig.rig import layout as L
from mprig.rig.attenuator import RadioPath, StandInAttenuator, attenuation_for_distance
from mprig.run import commands, run_attempt, run_stages

SPEC = """\
name: labd
paths:
  - {name: wifi, kind: wifi, rate_mbit: 54, distance_m: 40}
  - {name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40}
variants:
  - {name: mptcp}
"""


def the_run() -> Run:
    return expand(parse_campaign(SPEC, "labd.yaml"))[0]


def test_a_radio_path_gets_no_netem_and_the_others_keep_theirs() -> None:
    r = the_run()
    links = L.layout(r.paths)
    cmds = commands.build(r, links, radio_paths=frozenset({"wifi"}))
    tc = [(host, argv[4]) for host, argv in cmds.setup + cmds.teardown if argv[0] == "tc"]
    assert tc == [("cell", "lan0"), ("cell", "wan0"), ("cell", "lan0"), ("cell", "wan0")]


def test_the_runner_sets_the_channel_models_attenuation_and_reads_it_back() -> None:
    stand_in = StandInAttenuator("wifi")
    radio = RadioPath(stand_in, physical_m=2.0, radio=Radio(exponent=3.0))
    record = run_stages.set_attenuation(the_run(), {"wifi": radio})
    want = attenuation_for_distance(40, physical_m=2.0, radio=Radio(exponent=3.0))
    assert stand_in.calls == [("set_db", want), ("get_db", want)]
    assert record == {
        "wifi": {
            "attenuator": "stand-in wifi",
            "distance_m": 40.0,
            "physical_m": 2.0,
            "db": round(want, 3),
            "applied_db": round(want, 3),
            "read_db": round(want, 3),
        }
    }


def test_an_attenuator_that_reads_back_another_value_fails_the_run() -> None:
    stand_in = StandInAttenuator("wifi", read_offset_db=1.5)
    with pytest.raises(run_attempt.RunFailed, match=r"wifi: stand-in wifi reads back [\d.]+ dB"):
        run_stages.set_attenuation(the_run(), {"wifi": RadioPath(stand_in, 2.0)})


def lab_hostvars(attenuators: object) -> dict[str, dict[str, object]]:
    links = L.layout(the_run().paths)
    text = I.render_inventory("lab1", links, Path("/run/mprig/lab1"))
    import yaml

    data = yaml.safe_load(text)["all"]
    out: dict[str, dict[str, object]] = {}
    for group in data["children"].values():
        for host, hv in group["hosts"].items():
            out.setdefault(host, dict(data["vars"])).update(hv or {})
    for hv in out.values():
        hv["mprig_attenuators"] = attenuators
    return out


def test_the_inventory_names_a_paths_attenuator() -> None:
    hv = lab_hostvars({"wifi": {"driver": "stand-in", "physical_m": 1.5}})
    rig = I.rig_from_inventory(Path("lab"), {"_meta": {"hostvars": hv}})
    ((name, radio),) = rig.attenuators.items()
    assert (name, radio.attenuator.name, radio.physical_m) == ("wifi", "stand-in wifi", 1.5)


@pytest.mark.parametrize(
    ("attenuators", "message"),
    [
        ({"cell": {"driver": "stand-in"}}, "lab: mprig_attenuators: cell: not a wifi path"
         " of mprig_paths (wifi paths: wifi)"),
        ({"wifi": {"driver": "magic"}}, "lab: mprig_attenuators: wifi: driver must be one"
         " of rcdat, txpower, stand-in, got 'magic'"),
        ({"wifi": {"driver": "rcdat"}}, "lab: mprig_attenuators: wifi: driver rcdat needs"
         " host (the attenuator's address)"),
        ({"wifi": {"driver": "stand-in", "physical_m": 0}}, "lab: mprig_attenuators: wifi:"
         " physical_m must be a number > 0, got 0"),
    ],
)  # fmt: skip
def test_a_bad_attenuator_entry_names_the_inventory_and_the_path(
    attenuators: object, message: str
) -> None:
    hv = lab_hostvars(attenuators)
    with pytest.raises(UsageError) as e:
        I.rig_from_inventory(Path("lab"), {"_meta": {"hostvars": hv}})
    assert str(e.value) == message
