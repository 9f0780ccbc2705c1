"""The rig around a campaign: the hosts' kernel and tool versions (once per campaign),
the sweep that removes what a killed runner left, and the baseline of every knob the
variants can set, taken at the start, stored until it is put back at the end and read
back then (STYLE.md 21).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from mprig.rig.batch import Batch, Cmd, run_batch
from mprig.rig.host import Rig
from mprig.run import bundle, commands, impair
from mprig.run.progress import Reporter
from mprig.stack import isolation

FACTS_SCRIPT = (
    "uname -r; iperf3 --version 2>&1 | head -n1; tcpdump --version 2>&1 | head -n1; "
    "tc -V 2>&1 | head -n1; ss -V 2>&1 | head -n1; "
    "iperf3 --help 2>&1 | grep -c -- --mptcp || true"
)


FACT_KEYS = ("kernel", "iperf3", "tcpdump", "tc", "ss")


# The client's 802.11 links (a lab's radios, or hwsim in the virtual rig): `iw dev X link`
# per wireless interface, so a run records which AP it used, the signal and the bitrate.
WIFI_SCRIPT = (
    'for d in /sys/class/net/*/wireless; do [ -e "$d" ] || continue; '
    'i=${d%/wireless}; i=${i##*/}; echo "@@wifi $i"; iw dev "$i" link 2>&1; done; exit 0'
)


def host_facts(rig: Rig) -> tuple[dict[str, dict[str, Any]], bool]:
    """Kernel and tool versions per host (once per campaign); whether iperf3 has --mptcp."""
    b = Batch()
    for name in rig.hosts:
        b.add(name, Cmd(["sh", "-c", FACTS_SCRIPT], check=False))
    b.add("client", Cmd(["sh", "-c", WIFI_SCRIPT], check=False))
    facts: dict[str, dict[str, Any]] = {}
    flag = False
    for name, done in run_batch(rig.hosts, b).items():
        lines = done[0].stdout.splitlines()
        lines += [""] * (len(FACT_KEYS) + 1 - len(lines))
        tools = dict(zip(FACT_KEYS[1:], lines[1:5], strict=True))
        facts[name] = {"kernel": lines[0], "tools": tools}
        if name == "client":
            flag = lines[5].strip() not in ("", "0")
            if wifi := parse_wifi(done[1].stdout if len(done) > 1 else ""):
                facts[name]["wifi"] = wifi
    return facts, flag


def parse_wifi(text: str) -> dict[str, str]:
    """WIFI_SCRIPT's output: interface -> its `iw dev X link` text."""
    links: dict[str, str] = {}
    for block in text.split("@@wifi ")[1:]:
        name, _, body = block.partition("\n")
        links[name.strip()] = body.strip()
    return links


# (`<host>.tar`: what runners before the streamed fetch left on the host.)
SWEEP_SCRIPT = (
    'for f in "$1"/*/"$2"/*.pid; do [ -s "$f" ] && kill -s KILL -- "-$(cat "$f")" 2>/dev/null; '
    'done; rm -rf "$1"/*/"$2" "$1"/*/"$2".tar; rmdir "$1"/* "$1" 2>/dev/null; exit 0'
)


def sweep_rig(rig: Rig) -> None:
    """Remove what a killed runner left on the rig: its background processes (by their
    recorded pids), its remote files, and the impairments on every router."""
    b = Batch()
    root = commands.remote_root(rig.name)
    for host in rig.hosts:
        b.add(host, Cmd(["sh", "-c", SWEEP_SCRIPT, "mprig-sweep", root, host], check=False))
    for link in rig.paths:
        for clear in impair.clear_commands(link):
            b.add(clear[0], Cmd(clear[1], check=False))
    run_batch(rig.hosts, b)


def baseline_file(rig: Rig) -> Path:
    """Where a campaign keeps its rig's baseline until it has put it back (a campaign that
    was killed leaves it, and the next one on the rig restores from it)."""
    return Path(os.environ.get("MPRIG_STATE", "/run/mprig")) / f"{rig.name}.baseline.json"


def read_settings(rig: Rig, base: isolation.Baseline) -> isolation.Settings:
    """Every host's settings now, in one round trip."""
    b = Batch()
    for host in rig.hosts:
        b.add(host, Cmd(base.read_argv(host), check=False))
    done = run_batch(rig.hosts, b)
    return {h: isolation.parse(d[0].stdout if d else "") for h, d in done.items()}


def take_baseline(rig: Rig, variants: list[Any], reporter: Reporter) -> isolation.Baseline:
    """Read every knob the variants can set from the hosts: the campaign's baseline (or the
    one an unfinished campaign stored, which the live values may be polluted from)."""
    keys = isolation.campaign_keys(variants)
    empty = isolation.Baseline(keys, isolation.devices(rig.paths), {})
    hosts = read_settings(rig, empty)
    path = baseline_file(rig)
    with contextlib.suppress(OSError, ValueError):
        stored = json.loads(path.read_text())
        hosts = isolation.overlay(hosts, stored)
        reporter.message(f"restoring the baseline an unfinished campaign stored in {path}")
    base = dataclasses.replace(empty, hosts=hosts)
    path.parent.mkdir(parents=True, exist_ok=True)
    bundle.write_json(path, base.as_json())
    return base


def restore_baseline(rig: Rig, base: isolation.Baseline, reporter: Reporter) -> None:
    """Put the baseline back at the campaign's end, read it back, say what differs."""
    b = Batch()
    for host, argv in isolation.restore_all(base.hosts):
        b.add(host, Cmd(argv, check=False))
    run_batch(rig.hosts, b)
    if problems := isolation.diff(base.hosts, read_settings(rig, base)):
        reporter.message(f"the rig is not back at its baseline: {'; '.join(problems)}")
    baseline_file(rig).unlink(missing_ok=True)
