"""Malformed campaign files through the real CLI: one line per error, exit status 2.

Every file in tests/unit/campaigns/ is fed to `mprig validate` in its own process. Each
error must be one stderr line naming file:line (where the file has lines) and the field,
every error of the file is listed, with no traceback, and the child costs well under a
second of CPU time (CPU time, not wall time, so that a busy CI machine does not make the
test flaky).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mprig.campaign.spec import PATH_AXIS_FIELDS, Campaign
from mprig.campaign.spec import Path as SpecPath
from mprig.campaign.spec_models import DIRECTION_FIELDS

CAMPAIGNS = Path(__file__).parent / "campaigns"
REPO = Path(__file__).parents[2]

# file -> the error line after "mprig: error: <file>"
EXPECTED = {
    "absurd_repetitions.yaml": ":16: repetitions: must be less than or equal to 1000, got"
    " 1000000 (allowed: >= 1 and <= 1000: with sweep points and variants, a plan has at"
    " most 100000 runs)",
    "alias_bomb.yaml": ":3: YAML aliases (*name) are not allowed; write the value out",
    "binary_junk.yaml": ":1: not UTF-8 text (byte 0xb8): binary data or another encoding;"
    " save campaigns as UTF-8 YAML",
    "deep_nesting.yaml": ":2: nesting deeper than 32 levels",
    "duplicate_key.yaml": ":7: duplicate key 'rate_mbit' (first at line 5)",
    "duplicate_path_name.yaml": ":7: paths.wifi.name: duplicate name 'wifi'",
    "empty.yaml": ": empty file; a campaign needs at least name, paths, variants",
    "list_for_number.yaml": ":2: repetitions: must be a valid integer, got [1, 2]"
    " (allowed: >= 1 and <= 1000: with sweep points and variants, a plan has at most"
    " 100000 runs)",
    "initial_buffer_over_swept_max.yaml": ":17: sweep.axes[variants.mptcp.rmem]: value"
    " 524288: rmem_initial: 1048576 is over `rmem: 524288`, its maximum",
    "initial_buffer_without_max.yaml": ":13: variants.mptcp.wmem_initial: needs `wmem:`, the"
    " maximum it is under",
    "list_top_level.yaml": ":1: the top level must be a mapping (key: value), got a list",
    "negative_delay.yaml": ":10: paths.cell.delay_ms: must be greater than or equal to 0,"
    " got -5 (allowed: >= 0 and <= 10000: 10 s one way is beyond any real path, satellite"
    " included)",
    # every error of a file, one line each
    "no_variants.yaml": ":11: variants: must have at least 1 item, got []\n"
    "mprig: error: {path}:12: old: unknown key; allowed: name, description, rig, paths,"
    " variants, sweep, traffic, capture, repetitions, seed, order, references"
    + "".join(f", {k}" for k in list(Campaign.model_fields)[12:]),  # keys added since
    "non_utf8.yaml": ":16: not UTF-8 text (byte 0xe9): binary data or another encoding;"
    " save campaigns as UTF-8 YAML",
    "plan_too_large.yaml": ":16: sweep: plan has 2020202 runs (1010101 sweep points x 2"
    " variants x 1 repetitions); the limit is 100000",
    "shell_metachar_name.yaml": ":1: name: must be a letter or digit, then up to 63 of"
    " A-Z a-z 0-9 _ . -, got 'broken; rm -rf /'",
    "string_for_number.yaml": ":9: paths.cell.rate_mbit: must be a valid number, unable"
    " to parse string as a number, got 'fast' (allowed: > 0 and <= 100000: 100 Gbit/s is"
    " beyond any link a rig or netem carries)",
    "sweep_unknown_field.yaml": ":18: sweep.axes[paths.wifi.colour]: unknown path field"
    f" 'colour'; fields: {', '.join(PATH_AXIS_FIELDS)} (or down.<f>, up.<f>)",
    "sweep_unknown_variant.yaml": ":18: sweep.axes[variants.tcp_cell.cc]: no variant named"
    " 'tcp_cell'; variants: mptcp, tcp_wifi",
    "sweep_value_out_of_range.yaml": ":18: sweep.axes[paths.cell.loss_pct]: value 150:"
    " must be less than or equal to 100, got 150 (allowed: >= 0 and <= 100: a percentage"
    " of packets)",
    "sysctl_outside_net.yaml": ":17: variants.tcp_wifi.sysctls.kernel.core_pattern: not a"
    " sysctl mprig sets and restores; allowed: the per-namespace net.ipv4.tcp_* and"
    " net.mptcp.* keys listed in docs/campaign.md\n"
    "mprig: error: {path}:17: variants.tcp_wifi.sysctls.kernel.core_pattern: must be"
    " letters, digits, spaces and _ . : , / -, got '|/bin/sh'",
    "tab_indent.yaml": ":10: tab character in indentation; indent with spaces",
    "tcp_without_path.yaml": ":13: variants.tcp_wifi.path: a tcp variant needs `path: <path name>`",
    "unknown_key.yaml": ":7: paths.wifi.colour: unknown key; allowed:"
    f" {', '.join([*SpecPath.model_fields, *DIRECTION_FIELDS])}",  # path and direction keys
    "variant_unknown_path.yaml": ":15: variants.tcp_wifi.path: no path named 'wlan';"
    " paths: wifi, cell",
    "yaml_syntax_error.yaml": ":3: YAML syntax error: while parsing a flow node, did not find"
    " expected node content",
    "zero_rate.yaml": ":5: paths.wifi.rate_mbit: must be greater than 0, got 0"
    " (allowed: > 0 and <= 100000: 100 Gbit/s is beyond any link a rig or netem carries)",
    "zip_unequal_axes.yaml": ":17: sweep.mode: zip needs axes of equal length, got"
    " paths.wifi.delay_ms: 3, paths.cell.delay_ms: 2",
}


RUN_TIME = (
    "congestion controls cubic available (BPF ones built); every sysctl accepted by the"
    " hosts' kernel"
)


def validate(*files: str) -> subprocess.CompletedProcess[str]:
    """Run `mprig validate FILES` as a new process (a hang fails at its 30 s timeout; cost
    is not asserted here: no timing assertions in unit tests)."""
    proc = subprocess.run(
        [sys.executable, "-m", "mprig.cli", "validate", *files],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=30,
    )
    return proc


def test_every_fixture_has_an_expectation() -> None:
    assert sorted(p.name for p in CAMPAIGNS.glob("*.yaml")) == sorted(EXPECTED)
    assert len(EXPECTED) >= 15


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_malformed_file_gives_one_error_line(name: str) -> None:
    path = str(CAMPAIGNS / name)
    proc = validate(path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2,
        "",
        f"mprig: error: {path}{EXPECTED[name].format(path=path)}\n",
    )


def test_shipped_campaigns_validate() -> None:
    proc = validate("experiments/smoke.yaml", "experiments/nightly.yaml")
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0,
        "OK experiments/smoke.yaml: 6 runs\n"
        f"  checked at run time: {RUN_TIME}\n"
        "OK experiments/nightly.yaml: 6 runs\n"
        f"  checked at run time: {RUN_TIME}\n",
        "",
    )


def test_one_bad_file_among_good_ones_exits_2() -> None:
    bad = str(CAMPAIGNS / "zero_rate.yaml")
    proc = validate("experiments/smoke.yaml", bad)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2,
        f"OK experiments/smoke.yaml: 6 runs\n  checked at run time: {RUN_TIME}\n",
        f"mprig: error: {bad}{EXPECTED['zero_rate.yaml']}\n",
    )
