"""One name per thing (issue 20 part 3): a campaign writes TCP-DOOR as `tcpdoor` and PR-R as
`prr`; the BPF program names (`door`, `door_lia`, `door_fccc`) and the papers' spellings
(`TCP-DOOR`, `PR-R`) are still accepted, replaced before validation, with a warning naming
file:line and the spelling to write (mprig/campaign/spec_spelling.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mprig.campaign.plan import expand
from mprig.campaign.spec import parse_campaign

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
