"""Stack knobs: a variant as sysctls, congestion control, MPTCP scheduler, path manager
and endpoints, turned into the commands that set them on client and server."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence

from mprig.campaign import presets
from mprig.campaign.spec import Variant
from mprig.errors import UsageError
from mprig.rig import addr6
from mprig.rig.batch import Cmd
from mprig.rig.host import PathLink
from mprig.rig.layout import SERVER_ADDR

# net.mptcp.pm_type; RBPM (mprig.stack.rbpm) steers the kernel path manager's subflows
# from userspace
PM_TYPES = {"kernel": "0", "userspace": "1", "rbpm": "0"}
MPTCP_LIMIT = "8"  # subflows and add_addr_accepted on both ends: one per path, up to eight
_KEY = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")


def full_key(key: str) -> str:
    """A sysctl name: short TCP names (`tcp_dsack`) live under net.ipv4."""
    if not _KEY.match(key):
        raise UsageError(f"sysctl name {key!r} is not a sysctl (letters, digits, _ and .)")
    return key if "." in key else f"net.ipv4.{key}"


def sysctls(variant: Variant) -> dict[str, str]:
    """Every sysctl a variant sets on client and server, in the order they are applied.

    The reordering-recovery preset (mprig.campaign.presets; the kernel's defaults, "linux", when the
    variant names none) is always set in full, so one run's preset never leaks into the next.
    """
    presets.check_recovery_cc(variant.recovery, variant.cc)
    out = presets.recovery_sysctls(variant.recovery or "linux")
    out["net.ipv4.tcp_congestion_control"] = presets.cc_algorithm(variant.cc)
    if variant.protocol == "mptcp":
        out["net.mptcp.enabled"] = "1"
        out["net.mptcp.pm_type"] = _pm_type(variant)
        if variant.scheduler is not None:
            out["net.mptcp.scheduler"] = variant.scheduler
    # net.core.[rw]mem_max is not per network namespace (and only caps SO_RCVBUF); the
    # initial size is the variant's `*_initial` or the kernel's default, never over the
    # maximum, so a 50 KB buffer starts at 50 KB.
    for name, default in (("rmem", 131072), ("wmem", 16384)):
        size, initial = getattr(variant, name), getattr(variant, f"{name}_initial")
        if size is not None:
            out[f"net.ipv4.tcp_{name}"] = f"4096 {initial or min(default, size)} {size}"
    out.update({full_key(k): v for k, v in variant.sysctls.items()})
    return out


def congestion_controls(variants: Iterable[Variant]) -> list[str]:
    """The kernel algorithms the variants select (presets mapped), in order, once each."""
    return list(dict.fromkeys(presets.cc_algorithm(v.cc) for v in variants))


def _pm_type(variant: Variant) -> str:
    if variant.path_manager not in PM_TYPES:
        known = ", ".join(PM_TYPES)
        raise UsageError(
            f"variant {variant.name}: path_manager {variant.path_manager!r} not in {known}"
        )
    return PM_TYPES[variant.path_manager]


def used_links(variant: Variant, links: tuple[PathLink, ...]) -> tuple[PathLink, ...]:
    """The paths a variant uses: tcp its one path, mptcp its `paths` subset or all."""
    by_name = {link.name: link for link in links}
    names = (variant.path,) if variant.protocol == "tcp" else (variant.paths or tuple(by_name))
    missing = [n for n in names if n not in by_name]
    if None in names or missing:
        raise UsageError(f"variant {variant.name}: path(s) {missing or ['?']} not on the rig")
    return tuple(by_name[str(n)] for n in names)


def bind_link(variant: Variant, links: tuple[PathLink, ...]) -> PathLink:
    """The path of the initial subflow: the client binds to its address, so policy routing
    sends the connection over it."""
    return used_links(variant, links)[0]


def apply_commands(variant: Variant, links: tuple[PathLink, ...]) -> list[tuple[str, list[str]]]:
    """(host, argv) that put a variant in place on client and server."""
    cmds: list[tuple[str, list[str]]] = [
        (h, ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in host_sysctls(variant, h).items())])
        for h in ("client", "server")
    ]
    limits = ["subflows", MPTCP_LIMIT, "add_addr_accepted", MPTCP_LIMIT]
    cmds.append(("server", ["ip", "mptcp", "limits", "set", *limits]))
    if addr6.uses_v6(links):  # the server announces its IPv4 address to mixed connections
        server = ["mptcp endpoint flush", *(f"mptcp endpoint add {e}" for e in
                                            server_endpoints(variant, links))]  # fmt: skip
        cmds[-1] = ("server", ip_batch([" ".join(["mptcp", "limits", "set", *limits]), *server]))
    client = [" ".join(["mptcp", "limits", "set", *limits]), "mptcp endpoint flush"]
    used = used_links(variant, links)
    for link in endpoint_links(variant, links):
        eid = str(links.index(link) + 1)
        add = ["mptcp", "endpoint", "add", link.client_addr, "dev", link.client_if]
        client.append(" ".join([*add, "id", eid, *addr6.endpoint_flags(link, used)]))
    cmds.append(("client", ip_batch(client)))
    return cmds


def host_sysctls(variant: Variant, host: str) -> dict[str, str]:
    """sysctls() as one host gets them: the server of a userspace-PM variant keeps the
    kernel's path manager, which accepts the MP_JOINs mptcpd asks for on the client
    (mprig/stack/userpm.py)."""
    out = sysctls(variant)
    if host == "server" and variant.path_manager == "userspace":
        out["net.mptcp.pm_type"] = PM_TYPES["kernel"]
    return out


def endpoint_links(variant: Variant, links: tuple[PathLink, ...]) -> tuple[PathLink, ...]:
    """The paths that get a client endpoint: none under the userspace path manager, which
    ignores endpoints (mptcpd's plugin opens the subflows, mprig/stack/userpm.py)."""
    return () if variant.path_manager == "userspace" else used_links(variant, links)


def server_endpoints(variant: Variant, links: tuple[PathLink, ...]) -> list[str]:
    """The server endpoints a variant needs on the virtual rig (mprig/rig/addr6.py)."""
    return addr6.server_endpoints(SERVER_ADDR, used_links(variant, links))


# `ip -batch`: several ip commands for the price of one program started (0.1-0.3 s each
# under VM emulation). The lines are arguments, never part of the shell text; ip stops at
# the first line that fails and exits non-zero.
IP_BATCH = 'printf "%s\\n" "$@" | ip -batch -'


def ip_batch(lines: list[str]) -> list[str]:
    """argv running `lines` (ip commands without the leading `ip`) through one `ip -batch`."""
    return ["bash", "-c", IP_BATCH, "mprig-ip", *lines]


# `sysctl -q -w` without a program started: under VM emulation each `sysctl` costs 0.25-0.4
# s of a run's set-up, the builtin writes a few milliseconds. A constant script; the
# assignments are its arguments (full_key checked the names). As procps does: a name with
# no "/" has its dots turned into /proc/sys levels, the value is written as given, every
# assignment is tried and a failed one makes the status 1 (Debian 12's procps 4).
SYSCTL_W = (
    'rc=0; for a; do k=${a%%=*}; [[ $k == */* ]] || k=${k//.//}; { printf "%s" "${a#*=}" '
    '> "/proc/sys/$k"; } 2>/dev/null || { printf "sysctl: cannot set %s\\n" "${a%%=*}" >&2; '
    "rc=1; }; done; exit $rc"
)


def fuse_sysctl(cmds: Sequence[Cmd]) -> list[Cmd]:
    """One host's commands in order, each run of consecutive foreground `sysctl -q -w`
    commands replaced by one SYSCTL_W script (bash builtins, run as a subshell of the
    stage's script). The fused command keeps its parts, as run.json shows them."""
    out: list[Cmd] = []
    run: list[Cmd] = []

    def flush() -> None:
        if run:
            assignments = [a for c in run for a in c.argv[3:]]
            out.append(
                Cmd(
                    ["bash", "-c", SYSCTL_W, "mprig-sysctl", *assignments],
                    timeout=sum(c.timeout for c in run),
                    check=all(c.check for c in run),
                    parts=tuple(tuple(c.argv) for c in run),
                )
            )
        run.clear()

    for c in cmds:
        if _sysctl_write(c):
            run.append(c)
            continue
        flush()
        out.append(c)
    flush()
    return out


def _sysctl_write(c: Cmd) -> bool:
    a = c.argv
    plain = c.log is None and not c.enforce_timeout and not c.parts
    return plain and a[:3] == ["sysctl", "-q", "-w"] and all("=" in x for x in a[3:])


MPTCP_SHOW = ["mptcp limits show", "mptcp endpoint show"]


def set_and_show(argv: Sequence[str]) -> list[str] | None:
    """For a command that sets MPTCP limits or endpoints (`ip mptcp ...` or an ip_batch of
    `mptcp` lines), one `ip -batch` that sets them and then shows them, so the run's
    read-back needs no `ip` of its own (0.4-0.55 s each under VM emulation; isolation.
    with_mptcp reads the output); None for any other command. ip stops at a line that
    fails and exits non-zero, so nothing is shown after a failed set."""
    if list(argv[:2]) == ["ip", "mptcp"]:
        lines = [shlex.join(argv[1:])]
    elif list(argv[:3]) == ["bash", "-c", IP_BATCH]:
        lines = list(argv[4:])
    else:
        return None
    return ip_batch([*lines, *MPTCP_SHOW]) if all(x.startswith("mptcp ") for x in lines) else None


AVAILABLE_CC = "net.ipv4.tcp_available_congestion_control"


def read_argv(variant: Variant) -> list[str]:
    """`sysctl KEY...`: the values in force, recorded as host facts after applying, and the
    congestion controls the host offers (reports say "not available on this kernel")."""
    return ["sysctl", *sysctls(variant), AVAILABLE_CC]


def parse_sysctl(text: str) -> dict[str, str]:
    """Parse `sysctl KEY...` output (`key = value` lines; tabs inside values kept as
    single spaces)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            out[key.strip()] = " ".join(value.split())
    return out
