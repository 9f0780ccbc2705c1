"""Before a campaign on a lab rig: the congestion controls its variants name must exist on
the hosts that send (client for uploads, server for downloads; both are checked).

On the virtual rig `mprig run` registers mprig's BPF programs itself (one kernel serves
every namespace). A lab host's kernel is its own: the `bpf_cc` role of playbooks/site.yml
registers them, with the programs the campaign needs, which the error below spells out as
the exact command. Checking once up front turns what would be a failed run per variant
into one clear message before anything runs.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from pathlib import Path

from mprig.campaign import presets
from mprig.campaign.spec import Variant
from mprig.errors import HostError
from mprig.rig.host import Host, Rig
from mprig.stack import bpfcc, knobs

SENDERS = ("client", "server")
AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"


def missing(offered: dict[str, tuple[str, ...]], wanted: list[str]) -> dict[str, list[str]]:
    """Per host, the wanted algorithms it does not offer (hosts lacking none are left out)."""
    out = {h: [a for a in wanted if a not in have] for h, have in offered.items()}
    return {h: gaps for h, gaps in out.items() if gaps}


def provision_command(inventory: Path, programs: list[str]) -> str:
    """The site.yml run that builds and registers `programs` on the senders."""
    extra = json.dumps({"bpf_cc_programs": programs}, separators=(", ", ": "))
    return (
        "ANSIBLE_CONFIG=playbooks/ansible.cfg .venv/bin/ansible-playbook "
        f"-i {shlex.quote(str(inventory))} playbooks/site.yml "
        f"--limit {','.join(SENDERS)} -e {shlex.quote(extra)}"
    )


def message(gaps: dict[str, list[str]], inventory: Path) -> tuple[str, str]:
    """(first host, what to do) for the hosts that lack algorithms."""
    host = next(iter(gaps))
    absent = list(dict.fromkeys(a for names in gaps.values() for a in names))
    bpf = [a for a in absent if a in bpfcc.PROGRAMS]
    other = [a for a in absent if a not in bpfcc.PROGRAMS]
    where = "; ".join(f"{h} lacks {' '.join(names)}" for h, names in gaps.items())
    text = f"congestion control not available ({where})"
    if bpf:
        text += f". Register mprig's BPF programs with: {provision_command(inventory, bpf)}"
    if other:
        text += (
            f". {' '.join(other)}: not an mprig program; load its kernel module "
            "(modprobe tcp_<name>) or choose another cc"
        )
    return host, text


def check(rig: Rig, variants: Iterable[Variant], inventory: Path) -> None:
    """Raise HostError naming the hosts, the algorithms and the command when a sender lacks
    an algorithm the campaign selects."""
    offered = {name: probe(rig.hosts[name])[0] for name in SENDERS}
    gaps = missing(offered, knobs.congestion_controls(variants))
    if gaps:
        host, text = message(gaps, inventory)
        raise HostError(host, text)


# One script per host: its congestion controls, then what building BPF programs needs
# (the preflight reads the first part, `mprig doctor --inventory` both).
PROBE = (
    f"cat {AVAILABLE}; echo @@; "
    "[ -r /sys/kernel/btf/vmlinux ] && echo btf; "
    "for t in clang bpftool; do command -v $t >/dev/null && echo $t; done; "
    "[ -e /usr/include/bpf/bpf_helpers.h ] && echo libbpf-dev; true"
)


def program_status(name: str, offered: tuple[str, ...], found: set[str]) -> tuple[bool, str]:
    """Whether one BPF program is usable on a host (registered), and what to do if not."""
    if name in offered:
        return True, "registered"
    if "btf" not in found:
        return False, "kernel has no BTF (/sys/kernel/btf/vmlinux): needs CONFIG_DEBUG_INFO_BTF"
    tools = [t for t in ("clang", "bpftool", "libbpf-dev") if t not in found]
    if tools:
        return False, f"not registered; {' '.join(tools)} missing (the bpf_cc role installs them)"
    return False, "not registered: run site.yml with bpf_cc_programs naming it"


def probe(host: Host) -> tuple[tuple[str, ...], set[str]]:
    """A host's congestion controls, and which of btf, clang, bpftool, libbpf-dev it has."""
    cc_text, _, rest = host.script(PROBE, timeout=30).stdout.partition("@@")
    return presets.parse_available_cc(cc_text), set(rest.split())


def host_checks(rig: Rig) -> list[tuple[str, str, bool, str]]:
    """(host, program, usable, detail) for every mprig BPF program on client and server."""
    out = []
    for host in SENDERS:
        offered, found = probe(rig.hosts[host])
        for name in bpfcc.available():
            out.append((host, name, *program_status(name, offered, found)))
    return out
