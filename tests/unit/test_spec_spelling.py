"""One name per thing (issue 20 part 3): a campaign writes TCP-DOOR as `tcpdoor` and PR-R as
`prr`; the BPF program names (`door`, `door_lia`, `door_fccc`) and the papers' spellings
(`TCP-DOOR`, `PR-R`) are still accepted, replaced before validation, with a warning naming
file:line and the spelling to write (mprig/campaign/spec_spelling.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mprig.campaign import spec_spelling
from mprig.campaign.plan import expand
from mprig.campaign.spec import parse_campaign
from mprig.errors import SpecError

HEAD = """\
name: t
paths:
  - name: wifi
    kind: wifi
    rate_mbit: 20
variants:
"""

OLD = (
    HEAD
    + """\
  - name: door_sack
    cc: door
    recovery: tcpdoor
  - name: prr_paper
    recovery: PR-R
    cc: PR-R
  - name: door_co
    cc: door_lia
"""
)

NEW = (
    HEAD
    + """\
  - name: door_sack
    cc: tcpdoor
    recovery: tcpdoor
  - name: prr_paper
    recovery: prr
    cc: prr
  - name: door_co
    cc: tcpdoor_lia
"""
)

WHY_DOOR = "TCP-DOOR's preset is tcpdoor; door is the name of its BPF program"


def test_old_spellings_become_the_one_name_with_a_warning_at_their_line() -> None:
    campaign = parse_campaign(OLD, "old.yaml")
    assert [(v.name, v.cc, v.recovery) for v in campaign.variants] == [
        ("door_sack", "tcpdoor", "tcpdoor"),
        ("prr_paper", "prr", "prr"),
        ("door_co", "tcpdoor_lia", None),
    ]
    assert campaign.deprecations == (
        f"old.yaml:8: variants.door_sack.cc: 'door' is an old spelling, write 'tcpdoor'"
        f" ({WHY_DOOR}); accepted for now",
        "old.yaml:12: variants.prr_paper.cc: 'PR-R' is an old spelling, write 'prr'"
        " (PR-R's preset is prr); accepted for now",
        f"old.yaml:14: variants.door_co.cc: 'door_lia' is an old spelling, write"
        f" 'tcpdoor_lia' ({WHY_DOOR} over LIA); accepted for now",
        "old.yaml:11: variants.prr_paper.recovery: 'PR-R' is an old spelling, write 'prr'"
        " (PR-R's preset is prr); accepted for now",
    )


def test_the_one_name_gives_no_warning_and_the_same_runs() -> None:
    new = parse_campaign(NEW, "new.yaml")
    assert new.deprecations == ()
    old = parse_campaign(OLD, "old.yaml")
    assert [r.run_id for r in expand(old)] == [r.run_id for r in expand(new)]


def test_validate_prints_the_warning_and_accepts_the_file(tmp_path: Path) -> None:
    spec = tmp_path / "old.yaml"
    spec.write_text(OLD)
    proc = subprocess.run(
        [sys.executable, "-m", "mprig.cli", "validate", str(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("mprig: warning:")]
    assert (proc.returncode, len(warnings)) == (0, 4)
    assert warnings[0].startswith(f"mprig: warning: {spec}:8: variants.door_sack.cc: 'door' is")
    assert proc.stdout.startswith(f"OK {spec}: 3 runs\n")


# The Wi-Fi channel model calibrations are named by paper (paper000, paper003); `seed000`
# and `seed003` (seed means the random seed too) are the old spellings.
WIFI_PATH = """\
name: t
paths:
  - name: wifi
    kind: wifi
    rate_mbit: 54
    distance_m: 50
"""
WIFI = WIFI_PATH + "    channel_model: {model}\nvariants:\n  - name: mptcp\n"

WHY_PAPER = "channel models are named by paper: paperNNN"


def test_a_path_channel_model_old_spelling_is_the_paper_name_with_a_warning() -> None:
    old = parse_campaign(WIFI.format(model="seed000"), "old.yaml")
    new = parse_campaign(WIFI.format(model="paper000"), "new.yaml")
    assert old.paths[0].channel_model == "paper000"
    assert old.deprecations == (
        "old.yaml:7: paths.wifi.channel_model: 'seed000' is an old spelling, write"
        f" 'paper000' ({WHY_PAPER}); accepted for now",
    )
    assert new.deprecations == ()
    assert [r.run_id for r in expand(old)] == [r.run_id for r in expand(new)]


SWEEP = (
    WIFI_PATH
    + """\
variants:
  - name: mptcp
    cc: prr
  - name: other
    cc: prr
sweep:
  mode: zip
  axes:
    paths.wifi.channel_model: [{m0}, {m3}]
    variants.recovery:
      - {rec}
      - prr
    variants.other.cc: [prr_lia, {rec}]
    paths.wifi.distance_m: {{start: 50, stop: 60, step: 10}}
"""
)

OLD_SWEEP = SWEEP.format(m0="seed000", m3="seed003", rec="PR-R")
NEW_SWEEP = SWEEP.format(m0="paper000", m3="paper003", rec="prr")


def test_sweep_axis_values_in_old_spellings_are_respelled_with_the_axis_named() -> None:
    old = parse_campaign(OLD_SWEEP, "old.yaml")
    assert old.sweep is not None
    assert old.sweep.axes["paths.wifi.channel_model"] == ("paper000", "paper003")
    assert old.sweep.axes["variants.recovery"] == ("prr", "prr")
    assert old.sweep.axes["variants.other.cc"] == ("prr_lia", "prr")
    # an inline list's values are at the axis's line, a block list's each at its own
    assert old.deprecations == (
        "old.yaml:15: sweep.axes[paths.wifi.channel_model]: 'seed000' is an old spelling,"
        f" write 'paper000' ({WHY_PAPER}); accepted for now",
        "old.yaml:15: sweep.axes[paths.wifi.channel_model]: 'seed003' is an old spelling,"
        f" write 'paper003' ({WHY_PAPER}); accepted for now",
        "old.yaml:17: sweep.axes[variants.recovery]: 'PR-R' is an old spelling,"
        " write 'prr' (PR-R's preset is prr); accepted for now",
        "old.yaml:19: sweep.axes[variants.other.cc]: 'PR-R' is an old spelling,"
        " write 'prr' (PR-R's preset is prr); accepted for now",
    )


def test_a_sweep_in_old_spellings_plans_the_same_runs_as_the_one_name() -> None:
    old = parse_campaign(OLD_SWEEP, "old.yaml")
    new = parse_campaign(NEW_SWEEP, "new.yaml")
    assert new.deprecations == ()
    assert len(expand(new)) == 2 * 2  # zip: 2 points x 2 variants
    assert [r.run_id for r in expand(old)] == [r.run_id for r in expand(new)]


def test_a_bpf_program_name_in_a_cc_axis_no_longer_slips_through() -> None:
    # `door` is a valid cc token (the BPF program), so unrespelled it planned other run ids
    text = HEAD + "  - name: a\nsweep:\n  axes:\n    variants.cc: [door, prr]\n"
    campaign = parse_campaign(text, "s.yaml")
    assert campaign.sweep is not None and campaign.sweep.axes["variants.cc"] == ("tcpdoor", "prr")
    assert campaign.deprecations == (
        f"s.yaml:10: sweep.axes[variants.cc]: 'door' is an old spelling, write 'tcpdoor'"
        f" ({WHY_DOOR}); accepted for now",
    )


def test_sysctl_and_range_axes_are_not_respelled() -> None:
    # variants.sysctls.cc would be the sysctl `cc`, not the variant field; a range is numeric
    axes = {"variants.sysctls.cc": ["door"], "variants.cc": {"start": 1, "stop": 2, "step": 1}}
    data = {"sweep": {"axes": axes}}
    assert spec_spelling.respell(data) == (data, [])
    # ... unless a variant is named sysctls: spec.py parse_axis reads variant names first
    named = {"variants": [{"name": "sysctls"}], **data}
    respelled, [found] = spec_spelling.respell(named)
    assert respelled["sweep"]["axes"]["variants.sysctls.cc"] == ["tcpdoor"]
    assert found.loc == ("sweep", "axes", "variants.sysctls.cc", 0)


def test_respelling_takes_any_yaml_before_validation_names() -> None:
    """Old spellings are replaced before validation, so on data of any shape: a variant
    named by a list (a fuzz case of CI) is validation's error to report, not a TypeError."""
    bad = HEAD + "  - name: [a]\n  - name: t\nsweep:\n  axes:\n    variants.cc: [door]\n"
    with pytest.raises(SpecError, match=r"bad.yaml:\d+: variants"):
        parse_campaign(bad, "bad.yaml")
