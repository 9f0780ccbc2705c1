"""One judge for specs: `mprig validate` runs the planning code `mprig run` and `mprig plan`
use, lists every error with file:line, bounds every number with its reason, escapes what
it echoes, and never ends in a traceback or a hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_spec import BASE  # the two-path campaign every spec test starts from

from mprig.campaign.spec import Traffic
from mprig.cli.main import main
from mprig.run import traffic

REPO = Path(__file__).parents[2]


def validate(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Exit status and stderr of `mprig validate` on `text` (in process: a traceback
    would fail the test)."""
    spec = tmp_path / "c.yaml"
    spec.write_text(text)
    code = main(["validate", str(spec)])
    err = capsys.readouterr().err
    return code, err.replace(str(spec), "c.yaml")


def errors(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    code, err = validate(tmp_path, text, capsys)
    assert code == 2, err
    lines = err.splitlines()
    assert all(line.startswith("mprig: error: c.yaml:") for line in lines), err
    return [line.removeprefix("mprig: error: ") for line in lines]


CASES = {
    # a Wi-Fi path with distance_m: rate_mbit names the PHY mode, which 20 is not (11g)
    "wifi_rate_not_phy_mode": (
        BASE.replace("    rate_mbit: 20\n", "    rate_mbit: 20\n    distance_m: 30\n"),
        "c.yaml:5: paths.wifi.rate_mbit: with distance_m, rate_mbit names the 802.11g"
        " PHY mode: 802.11g has no 20 Mbit/s mode (valid: 6, 9, 12, 18, 24, 36, 48, 54)",
    ),
    "distance_on_cellular": (
        BASE.replace("    rate_mbit: 10\n", "    rate_mbit: 10\n    distance_m: 30\n"),
        "c.yaml:10: paths.cell.distance_m: is for Wi-Fi paths (the 802.11 channel model);"
        " this path is cellular",
    ),
    "wifi_standard_on_cellular": (
        BASE.replace("    rate_mbit: 10\n", "    rate_mbit: 10\n    wifi_standard: 11b\n"),
        "c.yaml:10: paths.cell.wifi_standard: is for Wi-Fi paths (the 802.11 channel model);"
        " this path is cellular",
    ),
    "unknown_recovery": (
        BASE + "    recovery: magic\n",
        "c.yaml:16: variants.tcp_wifi.recovery: unknown recovery preset 'magic'; known:"
        " nopr, dsack, frto, eifel, linux, tcpdoor, prr",
    ),
    "recovery_needs_its_cc": (
        BASE + "    recovery: prr\n",
        "c.yaml:16: variants.tcp_wifi.recovery: recovery 'prr' (PR-R) is the congestion"
        " control 'prr': set `cc: prr` in the variant (it has cc: cubic)",
    ),
    "unknown_sysctl": (
        BASE + "    sysctls: {net.ipv4.tcp_no_such_knob: 1}\n",
        "c.yaml:16: variants.tcp_wifi.sysctls.net.ipv4.tcp_no_such_knob: not a sysctl mprig"
        " sets and restores; allowed: the per-namespace net.ipv4.tcp_* and net.mptcp.* keys"
        " listed in docs/campaign.md",
    ),
    "sysctl_with_a_field": (
        BASE + "    sysctls: {net.ipv4.tcp_congestion_control: reno}\n",
        "c.yaml:16: variants.tcp_wifi.sysctls.net.ipv4.tcp_congestion_control: set by the"
        " variant's `cc:`; use that instead",
    ),
    "vm_sysctl_is_global": (
        BASE + "    sysctls: {vm.swappiness: 1}\n",
        "c.yaml:16: variants.tcp_wifi.sysctls.vm.swappiness: not a sysctl mprig sets and"
        " restores; allowed: the per-namespace net.ipv4.tcp_* and net.mptcp.* keys listed in"
        " docs/campaign.md",
    ),
    "zip_duplicate_runs": (
        BASE + "sweep:\n  mode: zip\n  axes:\n    paths.wifi.delay_ms: [5, 5]\n"
        "    paths.cell.delay_ms: [7, 7]\n",
        "c.yaml:16: sweep: point (paths.wifi.delay_ms=5, paths.cell.delay_ms=7): the same"
        " runs as another point (same parameters, same run ids); make every point differ",
    ),
    "sweep_combination_invalid": (
        BASE + "traffic: {duration_s: 10}\nsweep:\n  mode: zip\n  axes:\n"
        "    traffic.duration_s: [5, 10]\n    traffic.omit_s: [5, 2]\n",
        "c.yaml:17: sweep: point (traffic.duration_s=5, traffic.omit_s=5):"
        " omit_s: must be < duration_s (5)",
    ),
    "duration_too_short": (
        BASE + "traffic: {duration_s: 0.5}\n",
        "c.yaml:16: traffic.duration_s: must be greater than or equal to 1, got 0.5 (allowed:"
        " >= 1 and <= 86400: iperf3 counts whole seconds and treats -t 0 as forever; a"
        " bulk transfer must end within it)",
    ),
    "iperf3_fraction": (
        BASE + "traffic: {duration_s: 2.5}\n",
        "c.yaml:16: traffic.duration_s: iperf3 counts whole seconds (-t 2.5 would run 2 s);"
        " use a whole number",
    ),
    "snaplen_too_short": (
        BASE + "capture: {snaplen: 100}\n",
        "c.yaml:16: capture.snaplen: must be greater than or equal to 140, got 100 (allowed:"
        " >= 140 and <= 262144: Linux cooked header 20 + IPv4 header up to 60 + TCP header"
        " with the full 40 bytes of options 60, so every MPTCP option (DSS) is captured)",
    ),
    "bulk_cannot_fit": (
        BASE + "traffic: {tool: bulk, bytes: 1000000000, duration_s: 10}\n",
        "c.yaml:16: traffic.duration_s: a bulk transfer of 1000000000 bytes needs at least"
        " 267 s at the paths' 30 Mbit/s; raise duration_s (the transfer's deadline) or"
        " lower bytes",
    ),
    "huge_integer": (
        BASE + "repetitions: " + "9" * 5000 + "\n",
        "c.yaml:16: number with 5000 digits; numbers in a campaign have at most 30",
    ),
    "range_overflow": (
        BASE + "sweep:\n  axes:\n    paths.wifi.delay_ms: {start: -1.7e308, stop: 1.7e308,"
        " step: 1}\n",
        "c.yaml:18: sweep.axes[paths.wifi.delay_ms]: range from -1.7e+308 to 1.7e+308 step 1"
        " has more than 100000 values; the limit is 100000",
    ),
    "control_chars_in_key": (
        BASE.replace("    delay_ms: 40\n", '    "delay\\n\\emprig: error: ok": 40\n'),
        "c.yaml:10: paths.cell.delay\\n\\emprig: error: ok: unknown key;",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_validate_names_the_error(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = CASES[name]
    got = errors(tmp_path, text, capsys)
    assert len(got) == 1 and got[0].startswith(expected), got


def test_every_error_is_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        BASE.replace("delay_ms: 10", "delay_ms: -1").replace("delay_ms: 40", "delay_ms: 1e9")
        + "    recovery: magic\n    sysctls: {net.ipv4.tcp_bogus: 1}\n"
        + "traffic: {duration_s: 0}\ncapture: {snaplen: 10}\n"
    )
    got = [line.split(": ")[1] for line in errors(tmp_path, text, capsys)]
    assert got == [
        "paths.wifi.delay_ms",
        "paths.cell.delay_ms",
        "variants.tcp_wifi.recovery",
        "variants.tcp_wifi.sysctls.net.ipv4.tcp_bogus",
        "traffic.duration_s",
        "capture.snaplen",
    ]


def test_cross_reference_errors_are_all_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = BASE.replace("path: wifi", "path: lan") + "  - name: m2\n    paths: [x, wifi]\n"
    got = errors(tmp_path, text, capsys)
    assert got == [
        "c.yaml:15: variants.tcp_wifi.path: no path named 'lan'; paths: wifi, cell",
        "c.yaml:17: variants.m2.paths: no path named 'x'; paths: wifi, cell",
    ]


def test_control_characters_in_file_names_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "a\nmprig: error: forged\x1b[2J.yaml"
    spec.write_text("name: [")
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "a\\nmprig: error: forged\\e[2J" in err


def test_fifo_spec_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    proc = subprocess.run(
        [sys.executable, "-m", "mprig.cli", "validate", str(fifo)],
        capture_output=True,
        text=True,
        timeout=20,
        cwd=REPO,
    )
    assert (proc.returncode, proc.stderr) == (
        2,
        f"mprig: error: {fifo}: campaign file is a FIFO (named pipe), not a regular file\n",
    )


def test_validate_lists_what_is_checked_at_run_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text(BASE + "    cc: lia\n")
    assert main(["validate", str(spec)]) == 0
    assert capsys.readouterr().out == (
        f"OK {spec}: 2 runs\n"
        "  checked at run time: congestion controls cubic, lia available (BPF ones built);"
        " every sysctl accepted by the hosts' kernel\n"
    )


# -- traffic that ends when it should


def test_iperf3_duration_is_never_zero() -> None:
    argv = traffic.iperf3_client_argv(
        Traffic.model_construct(duration_s=0.5, omit_s=0, direction="upload", tool="iperf3"),
        "10.0.0.1",
        "10.1.1.2",
        "/tmp/x.json",
        mptcp=False,
    )
    assert argv[argv.index("-t") + 1] == "1"


def test_every_traffic_timeout_follows_the_duration() -> None:
    assert traffic.timeout_s(Traffic(duration_s=5, omit_s=1)) == 21.0
    bulk = Traffic(tool="bulk", bytes=10**6, duration_s=200)
    assert traffic.timeout_s(bulk) == 215.0
    assert traffic.timeout_s(bulk.model_copy(update={"duration_s": 3})) == 18.0


# -- command-line numbers and paths


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["analyze", "x.pcap", "--k", "9" * 5000], "argument --k: 999999999999999999999999999999"),
        (["analyze", "x.pcap", "--k", "0"], "argument --k: 0 is out of range; allowed: 1 to 1e+06"),
        (["analyze", "x.pcap", "--bin", "nan"], "argument --bin: 'nan' is not a number in range"),
        (["analyze", "x.pcap", "--bin", "inf"], "argument --bin: 'inf' is not a number in range"),
        (["collect", "results", "--k", "1e400"], "argument --k: not a whole number: '1e400'"),
        (["collect", "results", "--bin", "-1"], "argument --bin: '-1' is not a number in range"),
        (["compare", "a", "b", "--tolerance", "nan"], "argument --tolerance: 'nan' is not"),
    ],
)
def test_number_options_are_bounded(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and "Traceback" not in err, err


def test_fifo_capture_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "client.pcap"
    os.mkfifo(fifo)
    assert main(["analyze", str(fifo)]) == 2
    assert capsys.readouterr().err == (f"mprig: error: {fifo}: capture is a FIFO (named pipe)\n")


# -- inventories


def lab_spec(tmp_path: Path, inventory: str) -> Path:
    spec = tmp_path / "lab.yaml"
    spec.write_text(BASE + f"rig:\n  inventory: {inventory}\n")
    return spec


def test_campaign_inventory_outside_inventory_dir_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "hosts.yml"
    outside.write_text("all: {}\n")
    assert main(["plan", "--commands", str(lab_spec(tmp_path, str(outside)))]) == 2
    assert capsys.readouterr().err == (
        f"mprig: error: {outside}: a campaign's rig.inventory must lie under inventory/"
        " (symlinks followed); give an inventory elsewhere on the command line:"
        " --inventory PATH\n"
    )


def test_symlink_out_of_inventory_dir_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "secret.yml").write_text("all: {}\n")
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "lab.yml").symlink_to(tmp_path / "secret.yml")
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--commands", str(lab_spec(tmp_path, "inventory/lab.yml"))]) == 2
    assert "must lie under inventory/ (symlinks followed)" in capsys.readouterr().err


def test_executable_inventory_is_never_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "inventory" / "lab.sh"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{}}'\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    assert (
        main(["plan", "--commands", "--inventory", str(script), str(lab_spec(tmp_path, "virtual"))])
        == 2
    )
    assert capsys.readouterr().err == (
        f"mprig: error: {script}: inventory file is executable; Ansible would run it as a"
        " script, mprig reads inventories as static YAML/INI: chmod -x it\n"
    )
    assert not marker.exists()
