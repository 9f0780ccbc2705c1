"""`mprig doctor`: what this machine can run, and in which rig mode.

Kernel features are probed, not guessed from /proc/modules: a netem qdisc is added in a
throwaway namespace, and so on. Tools are looked up on PATH (and in the venv) with their
versions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mprig import datafiles
from mprig.tools import which

EPILOG = """\
examples:
  mprig doctor            kernel features, tools and versions, the rig mode and why
  mprig doctor --json     the same as JSON (for CI logs and bug reports)
  mprig doctor --inventory inventory/lab
                          also, over SSH, which BPF congestion controls the lab's client
                          and server have registered, and what each one lacks
  mprig doctor --probe-kvm
                          boot a guest with KVM now and cache whether it reached userspace
                          (KVM counts as usable only then; the cache is keyed to the host
                          kernel, the QEMU version and /dev/kvm)
  sample verdict:
      rig mode: vm (sch_netem is missing on the running kernel 6.18.44: boots
      /boot/vmlinuz-6.1.0-56-amd64)
"""


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    name: str  # feature or tool
    ok: bool  # present / usable
    detail: str  # version, path, or what is missing and how to get it
    required: bool = True  # False: optional (Wi-Fi emulation, KVM, tshark ...)


# (name, argv for the version, required, Debian package)
TOOLS: tuple[tuple[str, tuple[str, ...], bool, str], ...] = (
    ("ip", ("ip", "-V"), True, "iproute2"),
    ("tc", ("tc", "-V"), True, "iproute2"),
    ("iperf3", ("iperf3", "--version"), True, "iperf3"),
    ("mptcpize", ("mptcpize", "--help"), False, "mptcpize"),
    ("tcpdump", ("tcpdump", "--version"), True, "tcpdump"),
    ("ethtool", ("ethtool", "--version"), True, "ethtool"),
    ("sshd", ("sshd", "-V"), True, "openssh-server"),
    ("ssh", ("ssh", "-V"), True, "openssh-client"),
    ("ansible-playbook", ("ansible-playbook", "--version"), True, "pip: ansible-core"),
    ("qemu-system-x86_64", ("qemu-system-x86_64", "--version"), False, "qemu-system-x86"),
    ("vng", ("vng", "--version"), False, "pip: virtme-ng"),
    ("hostapd", ("hostapd", "-v"), False, "hostapd"),
    ("wpa_supplicant", ("wpa_supplicant", "-v"), False, "wpasupplicant"),
    ("tshark", ("tshark", "--version"), False, "tshark"),
)


def first_version_line(text: str) -> str:
    """The first non-empty line of a tool's version output, shortened."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines:
        if any(ch.isdigit() for ch in line):
            return line[:90]
    return lines[0][:90] if lines else "present"


def tool_check(name: str, argv: tuple[str, ...], required: bool, package: str) -> Check:
    """Whether a tool is present, and its version."""
    path = which(argv[0])
    if path is None:
        return Check(name, False, f"missing: install {package}", required)
    try:
        p = subprocess.run(
            [path, *argv[1:]], capture_output=True, text=True, timeout=20, check=False
        )
        version = first_version_line(p.stdout + p.stderr)
    except (OSError, subprocess.TimeoutExpired) as e:
        version = f"present, version unknown ({e})"
    if name == "mptcpize":
        version = "present"
    return Check(name, True, f"{version} ({path})", required)


def iperf3_mptcp_check() -> Check:
    """Whether iperf3 has --mptcp (3.16+); otherwise runs use `mptcpize run iperf3`."""
    path = which("iperf3")
    if path is None:
        return Check("iperf3 --mptcp", False, "iperf3 missing", False)
    p = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10, check=False)
    if "--mptcp" in p.stdout + p.stderr:
        return Check("iperf3 --mptcp", True, "supported", False)
    return Check("iperf3 --mptcp", False, "not supported: runs use `mptcpize run iperf3`", False)


def kernel_checks() -> list[Check]:
    """MPTCP, sch_netem, TBF, mac80211_hwsim, BPF struct_ops (BTF)."""
    from mprig.rig import vmprobe
    from mprig.run import rbpm_run
    from mprig.stack import userpm

    enabled = Path("/proc/sys/net/mptcp/enabled")
    mptcp = enabled.exists() and enabled.read_text().strip() == "1"
    btf = Path("/sys/kernel/btf/vmlinux").exists()
    rel = os.uname().release
    return [
        Check("MPTCP", mptcp, "net.mptcp.enabled = 1" if mptcp else f"absent or off in {rel}"),
        _feature("sch_netem", vmprobe.netem_available(), "netem qdisc", "VM mode provides it"),
        _feature(
            "sch_tbf", vmprobe.tbf_available(), "tbf qdisc", "kernel lacks CONFIG_NET_SCH_TBF"
        ),
        _feature("mac80211_hwsim", vmprobe.hwsim_available(), "Wi-Fi emulation", "veth Wi-Fi hop"),
        Check("BPF struct_ops", btf, "/sys/kernel/btf/vmlinux" if btf else "no kernel BTF", False),
        *bpf_cc_checks(),
        Check("RBPM controller", *rbpm_run.doctor_check(), False),
        Check("mptcpd plugin (path_manager userspace)", *userpm.doctor_check(), False),
    ]


def bpf_cc_checks() -> list[Check]:
    """Per BPF congestion control (prr, door): loaded, or builds and registers here."""
    from mprig.stack import bpfcc

    return [
        Check(f"cc {c.name} (BPF)", c.ok, c.detail, False)
        for c in map(bpfcc.loadable, bpfcc.available())
    ]


def _feature(name: str, ok: bool, what: str, otherwise: str) -> Check:
    required = name == "sch_tbf"
    return Check(name, ok, f"{what} available" if ok else f"missing ({otherwise})", required)


def vm_checks() -> list[Check]:
    """The kernel image VM mode would boot, and whether KVM is usable."""
    from mprig.errors import MprigError
    from mprig.rig import kvm, vmprobe

    try:
        image = Check("VM kernel", True, str(vmprobe.find_kernel()), False)
    except MprigError as e:
        image = Check("VM kernel", False, str(e), False)
    answer = kvm.answer()
    verdict = (
        "unknown: the next VM boot tries KVM for a short deadline"
        if answer.usable is None
        else "usable"
        if answer.usable
        else "not usable: VM mode uses software emulation"
    )
    detail = f"{verdict} ({answer.reason}); override with --kvm/--no-kvm or {kvm.KVM_ENV}=1/0"
    return [image, Check("KVM", answer.usable is True, detail, False)]


def host_checks(inventory: Path) -> list[Check]:
    """Per lab sender host and BPF program: registered, or what it lacks."""
    from mprig.rig import inventory as inv
    from mprig.stack import lab_cc

    rig = inv.rig_from_inventory(inventory)
    try:
        rows = lab_cc.host_checks(rig)
    finally:
        rig.close()
    return [Check(f"{host}: cc {name}", ok, detail, False) for host, name, ok, detail in rows]


def gather(inventory: Path | None = None) -> dict[str, Any]:
    """Every check plus the rig mode verdict (and the lab hosts' BPF programs)."""
    from mprig.errors import MprigError
    from mprig.rig import vmprobe

    kernel = kernel_checks()
    tools = [tool_check(*t) for t in TOOLS] + [iperf3_mptcp_check()]
    try:
        mode, why = vmprobe.choose_mode("auto")
    except MprigError as e:
        mode, why = "none", str(e)
    return {
        "kernel_release": os.uname().release,
        "kernel": [asdict(c) for c in kernel],
        "tools": [asdict(c) for c in tools],
        "vm": [asdict(c) for c in vm_checks()],
        "rig_mode": mode,
        "rig_mode_reason": why,
        "project_files": datafiles.described(),
        **({"hosts": [asdict(c) for c in host_checks(inventory)]} if inventory else {}),
    }


def render(report: dict[str, Any]) -> str:
    """The report as aligned text lines."""
    lines = [f"kernel {report['kernel_release']}"]
    for section in ("kernel", "tools", "vm", "hosts"):
        if section not in report:
            continue
        lines.append(f"{section}:")
        for c in report[section]:
            mark = "ok " if c["ok"] else ("MISSING" if c["required"] else "no ")
            lines.append(f"  {mark:<7} {c['name']:<20} {c['detail']}")
    lines.append(f"rig mode: {report['rig_mode']} because {report['rig_mode_reason']}")
    if "project_files" in report:
        lines.append(
            f"playbooks, inventory, kernel-configs, experiments: {report['project_files']}"
        )
    return "\n".join(lines)


def missing_required(report: dict[str, Any]) -> list[str]:
    """Names of required features or tools that are missing."""
    checks = report["kernel"] + report["tools"]
    return [c["name"] for c in checks if c["required"] and not c["ok"]]


def register(subparsers: Any) -> None:
    """Add the `doctor` command."""
    p = subparsers.add_parser(
        "doctor",
        help="check kernel features and tools; say which rig mode applies and why",
        description="Check kernel features (MPTCP, sch_netem, mac80211_hwsim, BPF), tools and "
        "their versions, and decide between native and VM rig mode. Exit status 1 when "
        "something required is missing.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--inventory",
        type=Path,
        metavar="PATH",
        help="a lab inventory: also check its client's and server's BPF programs",
    )
    p.add_argument(
        "--probe-kvm",
        action="store_true",
        help="boot a guest with KVM now (up to a minute) and cache whether it ran a command",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the report; exit 1 if a required feature or tool is missing."""
    if args.probe_kvm:
        from mprig.rig import vm

        print("probing KVM: booting a guest with it ...", file=sys.stderr, flush=True)
        vm.probe_kvm()
    report = gather(args.inventory)
    print(json.dumps(report, indent=1) if args.json else render(report))
    return 1 if missing_required(report) else 0
