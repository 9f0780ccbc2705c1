"""Run isolation: every knob a campaign's variants can set, read from the hosts once at the
campaign's start (the baseline), restored before each run and at the end, read back after
each run's variant is applied and compared with what the spec asks for.

The knobs: on client and server every sysctl any variant sets (congestion control,
recovery preset, buffers, MPTCP scheduler and path manager, extra sysctls) and the MPTCP
limits and endpoints; on every rig interface the runner knows, the root qdisc and the
offloads (TSO, GSO, GRO, LRO); `tcp_available_congestion_control` shows the BPF
congestion controls registered. One command per host reads all of them (READ_SCRIPT), on
virtual and lab rigs alike. Everything here is pure; mprig.run.runner does the I/O.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mprig.campaign.spec import Variant
from mprig.rig import addr6
from mprig.rig.host import PathLink
from mprig.stack import knobs

# A constant script (no campaign value reaches this shell): $1 the sysctl names separated by
# spaces (knobs.full_key checked them: no glob or shell characters), then the interfaces.
# Under VM emulation each program started costs 0.1-0.3 s, so the script starts few: the
# sysctls are read from /proc/sys with bash's `read` (printed as `sysctl` prints them), one
# `ip -batch` gives the MPTCP limits (the line of `add_addr_accepted`/`subflows` pairs)
# and endpoints (on client and server only), one `tc qdisc show` every root qdisc (only
# where interfaces are read: none on the server);
# `ethtool -k` runs per interface only when asked: offloads are rig state no variant sets,
# read at the campaign's start and end, not on every run. $1 says what to read ("mptcp",
# "offloads"), $2 the sysctl names.
READ_SCRIPT = (
    'set -f; what=" $1 "; shift; echo "@@sysctl"; for k in $1; do '
    'IFS= read -r v < "/proc/sys/${k//.//}" && printf "%s = %s\\n" "$k" "$v"; done 2>/dev/null; '
    'shift; echo "@@limits"; s=limits; [[ $what == *" mptcp "* ]] && while IFS= read -r l; do '
    "if [[ $s == limits && ! $l =~ ^(add_addr_accepted|subflows) ]]; then "
    'echo "@@endpoints"; s=; fi; printf "%s\\n" "$l"; done < <(printf "%s\\n" '
    '"mptcp limits show" "mptcp endpoint show" | ip -batch - 2>/dev/null); '
    '[[ $s == limits ]] && echo "@@endpoints"; q=(); '
    "(( $# )) && mapfile -t q < <(tc qdisc show 2>/dev/null); "
    'for d; do echo "@@dev $d"; for l in "${q[@]}"; do [[ $l == *" dev $d root "* ]] '
    '&& printf "%s\\n" "$l"; done; [[ $what == *" offloads "* ]] && ethtool -k "$d" 2>/dev/null; '
    "done; exit 0"
)
# What the kernel learned from earlier connections and hands to the next one; no sysctl, so
# the baseline cannot restore it. The TCP metrics cache, per destination: RTT and its
# variance (they seed a new connection's first RTO), the reordering degree (a new
# connection's dupthresh, even above tcp_max_reordering: a NoPR run after a D-SACK run to
# the same address would start with D-SACK's learned tolerance; net/ipv4/tcp_metrics.c
# tcp_init_metrics), ssthresh (saved by default before Linux 5.6, so on the 4.19 lab kernel;
# later where tcp_no_ssthresh_metrics_save is 0: the next run skips slow start), Fast Open
# cookies; and the routes' cached exceptions (path MTU). Each run flushes them on client and
# server before its knobs are set. A constant script (no campaign value reaches it) that starts
# two programs (each `ip` costs 0.5-0.7 s in the busy campaign guest): one `ip -batch` shows,
# flushes and shows the cache again, lo's link block between the two shows as the marker
# that splits their entries (an entry's line starts with its address, lo's with "<index>:
# lo:", then indented lines; no marker: the report cannot be trusted, the script fails),
# then `ip -6 route flush cache`. It prints the entries it found and the entries left:
# "tcp_metrics 3 0".
FLUSH_SCRIPT = (
    "out=$(printf '%s\\n' 'tcp_metrics show' 'tcp_metrics flush all' 'link show dev lo' "
    "'tcp_metrics show' 'route flush cache' | ip -batch -) || "
    '{ echo "mprig: ip could not flush the TCP metrics cache or the route cache" >&2; exit 1; }; '
    "ip -6 route flush cache 2>/dev/null; "  # fails only where IPv6 is off: nothing cached
    "h=0; n=0; s=0; while IFS= read -r l; do [[ -n $l ]] || continue; "
    "if ((s == 0)); then if [[ $l =~ ^[0-9]+:\\ lo: ]]; then s=1; else h=$((h + 1)); fi; "
    "elif ((s == 1)) && [[ $l == [[:space:]]* ]]; then :; else s=2; n=$((n + 1)); fi; "
    'done <<< "$out"; ((s)) || '
    '{ echo "mprig: ip printed no link block for lo between the two shows" >&2; exit 1; }; '
    'echo "tcp_metrics $h $n"'
)
FLUSH_ARGV = ["bash", "-c", FLUSH_SCRIPT, "mprig-flush"]


def flushed(text: str) -> dict[str, int]:
    """FLUSH_SCRIPT's report as run.json `hosts.<host>.flushed` ({} when it printed none)."""
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "tcp_metrics" and all(w.isdigit() for w in words[1:]):
            return {"tcp_metrics": int(words[1]), "tcp_metrics_left": int(words[2])}
    return {}


OFFLOADS = {
    "tcp-segmentation-offload": "tso",
    "generic-segmentation-offload": "gso",
    "generic-receive-offload": "gro",
    "large-receive-offload": "lro",
}
KNOB_HOSTS = ("client", "server")  # where variants set sysctls and MPTCP limits
# Recorded, not compared: the machine-wide list of registered congestion controls (a BPF
# one registered meanwhile does not change a run; the algorithm in force is compared).
RECORDED_ONLY = frozenset({knobs.AVAILABLE_CC})


@dataclass(frozen=True)
class HostSettings:
    """The knobs in force on one host, as read back (JSON-ready via `as_json`)."""

    sysctls: dict[str, str] = field(default_factory=dict)  # name -> value, spaces collapsed
    mptcp_limits: dict[str, str] = field(default_factory=dict)  # subflows, add_addr_accepted
    endpoints: tuple[str, ...] = ()  # `ip mptcp endpoint show` lines, sorted
    devices: dict[str, dict[str, str]] = field(default_factory=dict)  # dev -> qdisc, offloads

    def as_json(self) -> dict[str, Any]:
        doc = dataclasses.asdict(self)
        doc["endpoints"] = list(self.endpoints)
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> HostSettings:
        return cls(
            sysctls=dict(doc.get("sysctls", {})),
            mptcp_limits=dict(doc.get("mptcp_limits", {})),
            endpoints=tuple(doc.get("endpoints", ())),
            devices={d: dict(v) for d, v in doc.get("devices", {}).items()},
        )


Settings = dict[str, HostSettings]  # host -> its settings


@dataclass(frozen=True)
class Baseline:
    """What the campaign's runs start from."""

    keys: tuple[str, ...]  # every sysctl the campaign's variants set
    devices: dict[str, list[str]]  # host -> the interfaces read there
    hosts: Settings  # host -> its settings at the campaign's start

    def read_argv(self, host: str, *, offloads: bool = True, mptcp: bool = True) -> list[str]:
        """The command that reads `host`'s settings (each run: without the offloads)."""
        keys = self.keys if host in KNOB_HOSTS else ()
        return read_argv(keys, self.devices.get(host, []), offloads=offloads, mptcp=mptcp)

    def as_json(self) -> dict[str, Any]:
        return {h: s.as_json() for h, s in self.hosts.items()}


def campaign_keys(variants: Iterable[Variant]) -> tuple[str, ...]:
    """Every sysctl any of the variants sets, in first-seen order."""
    keys: dict[str, None] = {}
    for v in variants:
        keys.update(dict.fromkeys(knobs.sysctls(v)))
    return tuple(keys)


def devices(links: Sequence[PathLink]) -> dict[str, list[str]]:
    """host -> the rig interfaces the runner knows there (client side and router sides)."""
    out: dict[str, list[str]] = {}
    for link in links:
        out.setdefault("client", []).append(link.client_if)
        out.setdefault(link.router, []).extend([link.router_client_if, link.router_server_if])
    return {h: list(dict.fromkeys(devs)) for h, devs in out.items()}


def read_argv(
    keys: Sequence[str], devs: Sequence[str], *, offloads: bool = True, mptcp: bool = True
) -> list[str]:
    """The one command that reads a host's settings (`keys`: sysctls, none on routers,
    which also have no MPTCP limits or endpoints to read; `mptcp=False`: those are read by
    the `ip -batch` that set them, knobs.set_and_show)."""
    names = " ".join([*keys, knobs.AVAILABLE_CC] if keys else [])
    wants = (("mptcp", bool(keys) and mptcp), ("offloads", offloads))
    what = " ".join(w for w, on in wants if on)
    return ["bash", "-c", READ_SCRIPT, "mprig-settings", what, names, *devs]


def without_offloads(settings: Settings) -> Settings:
    """`settings` with the interfaces' offloads left out (what a run reads back)."""
    out = {}
    for host, s in settings.items():
        devs = {d: {k: v for k, v in vals.items() if k == "qdisc"} for d, vals in s.devices.items()}
        out[host] = dataclasses.replace(s, devices=devs)
    return out


def parse(text: str) -> HostSettings:
    """READ_SCRIPT's output."""
    section, dev = "", ""
    lines: dict[str, list[str]] = {"sysctl": [], "limits": [], "endpoints": []}
    devs: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        if line.startswith("@@"):
            section, _, dev = line[2:].partition(" ")
            if section == "dev":
                devs[dev] = {}
        elif section == "dev":
            _device_line(devs[dev], line)
        elif section in lines and line.strip():
            lines[section].append(line)
    return HostSettings(
        sysctls=knobs.parse_sysctl("\n".join(lines["sysctl"])),
        mptcp_limits=_pairs(" ".join(lines["limits"]).split()),
        endpoints=tuple(sorted(" ".join(e.split()) for e in lines["endpoints"])),
        devices=devs,
    )


def from_qdiscs(qdiscs: str, devs: Sequence[str]) -> HostSettings:
    """A router's settings from a `tc [-s] qdisc show` it printed anyway (the run's
    snapshot): the root qdisc of each of `devs`, as READ_SCRIPT would read them without
    starting another tc. Routers have no sysctls, limits or endpoints to read."""
    lines = ["@@sysctl", "@@limits", "@@endpoints"]
    qs = [q for q in qdiscs.splitlines() if q.startswith("qdisc ")]
    for d in devs:
        lines += [f"@@dev {d}", *(q for q in qs if f" dev {d} root " in q)]
    return parse("\n".join(lines))


def _device_line(dev: dict[str, str], line: str) -> None:
    words = line.split()
    if len(words) >= 2 and words[0] == "qdisc":
        dev["qdisc"] = words[1]
        return
    name, sep, value = line.partition(":")
    if sep and name in OFFLOADS:
        dev[OFFLOADS[name]] = value.strip()


def with_mptcp(settings: HostSettings, shown: str) -> HostSettings:
    """`settings` with the MPTCP limits and endpoints from `shown`, the output of
    knobs.set_and_show (`mptcp limits show`, then `mptcp endpoint show`), read as
    READ_SCRIPT reads them."""
    lines = [line for line in shown.splitlines() if line.strip()]
    n = next((i for i, x in enumerate(lines) if not x.startswith(_LIMIT_WORDS)), len(lines))
    return dataclasses.replace(
        settings,
        mptcp_limits=_pairs(" ".join(lines[:n]).split()),
        endpoints=tuple(sorted(" ".join(e.split()) for e in lines[n:])),
    )


_LIMIT_WORDS = ("add_addr_accepted", "subflows")


def _pairs(words: list[str]) -> dict[str, str]:
    return dict(zip(words[::2], words[1::2], strict=False))


# -- what a run should read back --------------------------------------------------------


def expected(
    baseline: Settings,
    variant: Variant,
    links: tuple[PathLink, ...],
    setup: Sequence[tuple[str, list[str]]],
) -> Settings:
    """The settings a run must read back: the baseline with the variant's sysctls, MPTCP
    limits and client endpoints, and the qdiscs its `setup` commands put on the routers."""
    out = dict(baseline)
    limits = {"subflows": knobs.MPTCP_LIMIT, "add_addr_accepted": knobs.MPTCP_LIMIT}
    for host in KNOB_HOSTS:
        base, wanted = baseline.get(host, HostSettings()), knobs.host_sysctls(variant, host)
        sysctls = {**base.sysctls, **{k: " ".join(v.split()) for k, v in wanted.items()}}
        out[host] = dataclasses.replace(base, sysctls=sysctls, mptcp_limits=limits)
    used = knobs.used_links(variant, links)
    endpoints = tuple(
        sorted(_endpoint(ln, links, used) for ln in knobs.endpoint_links(variant, links))
    )
    out["client"] = dataclasses.replace(out["client"], endpoints=endpoints)
    if addr6.uses_v6(links):  # knobs.apply_commands set the server's endpoints too
        server = tuple(sorted(knobs.server_endpoints(variant, links)))
        out["server"] = dataclasses.replace(out["server"], endpoints=server)
    for host, argv in setup:
        # the root qdisc (an AQM tree's children, `parent` ...: mprig/run/aqm.py checks them)
        if argv[:3] == ["tc", "qdisc", "replace"] and "root" in argv and host in out:
            dev = argv[argv.index("dev") + 1]
            kind = argv[argv.index("root") + 1]
            devs = {d: dict(v) for d, v in out[host].devices.items()}
            devs.setdefault(dev, {})["qdisc"] = kind
            out[host] = dataclasses.replace(out[host], devices=devs)
    return out


def _endpoint(link: PathLink, links: tuple[PathLink, ...], used: tuple[PathLink, ...]) -> str:
    """As `ip mptcp endpoint show` prints the endpoint knobs.apply_commands adds."""
    flags = " ".join(addr6.endpoint_flags(link, used))
    return f"{link.client_addr} id {links.index(link) + 1} {flags} dev {link.client_if}"


def diff(want: Settings, got: Settings, words: tuple[str, str] = ("spec", "host")) -> list[str]:
    """Every difference, named: `client sysctl net.ipv4.tcp_rmem: spec '4096 ...', host
    '...'` (a knob the host did not report shows as 'unreadable'; RECORDED_ONLY left out;
    `words` name the two sides)."""
    out = []
    for host, w in want.items():
        g = got.get(host, HostSettings())
        for (kind, name), value in _flat(w).items():
            have = _flat(g).get((kind, name), "unreadable")
            if have != value and name not in RECORDED_ONLY:
                label = " ".join(w for w in (host, kind, name) if w)
                out.append(f"{label}: {words[0]} {value!r}, {words[1]} {have!r}")
    return out


def _flat(s: HostSettings) -> dict[tuple[str, str], str]:
    flat = {("sysctl", k): v for k, v in s.sysctls.items()}
    flat.update({("mptcp limit", k): v for k, v in s.mptcp_limits.items()})
    flat[("mptcp endpoints", "")] = "; ".join(s.endpoints) or "none"
    for dev, values in s.devices.items():
        flat.update({(dev, k): v for k, v in values.items()})
    return flat


# -- putting the baseline back ----------------------------------------------------------


def restore_sysctls(baseline: Settings, variant: Variant | None) -> list[tuple[str, list[str]]]:
    """(host, argv) that set every baseline sysctl the variant does not set itself (all of
    them with no variant: the campaign's end)."""
    wanted = knobs.sysctls(variant) if variant is not None else {}
    cmds = []
    for host in KNOB_HOSTS:
        values = {k: v for k, v in baseline.get(host, HostSettings()).sysctls.items()
                  if k not in wanted and k != knobs.AVAILABLE_CC}  # fmt: skip
        if values:
            cmds.append((host, ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in values.items())]))
    return cmds


def restore_all(baseline: Settings) -> list[tuple[str, list[str]]]:
    """(host, argv) that put the whole baseline back at the campaign's end: sysctls, MPTCP
    limits and the client's endpoints, offloads (root qdiscs go with the routers' clear
    commands, which return each interface to its default qdisc)."""
    cmds = restore_sysctls(baseline, None)
    for host in KNOB_HOSTS:
        limits = baseline.get(host, HostSettings()).mptcp_limits
        if limits:
            pairs = [w for k, v in limits.items() for w in (k, v)]
            cmds.append((host, ["ip", "mptcp", "limits", "set", *pairs]))
    for host in (h for h in ("client", "server") if h in baseline):  # server: addr6 signal
        cmds.append((host, ["ip", "mptcp", "endpoint", "flush"]))
        for line in baseline[host].endpoints:
            cmds.append((host, ["ip", "mptcp", "endpoint", "add", *shlex.split(line)]))
    for host, s in baseline.items():
        for dev, values in s.devices.items():
            features = [w for k, v in values.items() if k != "qdisc" and "[fixed]" not in v
                        for w in (k, v)]  # fmt: skip
            if features:
                cmds.append((host, ["ethtool", "-K", dev, *features]))
    return cmds


def overlay(live: Settings, stored: Mapping[str, Any]) -> Settings:
    """The live settings with those of a baseline an unfinished campaign stored (its values
    win: the live ones may be a killed run's variant)."""
    out = dict(live)
    for host, doc in stored.items():
        if host not in out or not isinstance(doc, Mapping):
            continue
        old, cur = HostSettings.from_json(doc), out[host]
        out[host] = HostSettings(
            sysctls={k: old.sysctls.get(k, v) for k, v in cur.sysctls.items()},
            mptcp_limits=old.mptcp_limits or cur.mptcp_limits,
            endpoints=old.endpoints if doc.get("endpoints") is not None else cur.endpoints,
            devices={d: old.devices.get(d, v) for d, v in cur.devices.items()},
        )
    return out


# -- a lab campaign's teardown, verified ----------------------------------------------------

# Read on every lab host before and after a campaign, on top of the campaign's own keys: the
# congestion control in force and the lists that show BPF congestion controls registered
# (available) and allowed; a campaign must leave all three as it found them.
TEARDOWN_KEYS = (knobs.AVAILABLE_CC, "net.ipv4.tcp_allowed_congestion_control",
                 "net.ipv4.tcp_congestion_control")  # fmt: skip


def teardown_devices(
    links: Sequence[PathLink], data_ifs: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """host -> every interface a lab campaign's teardown reads: the runner's (devices())
    and each host's data interfaces (the inventory's mprig_data_interfaces)."""
    out = devices(links)
    for host, ifs in data_ifs.items():
        out[host] = list(dict.fromkeys([*out.get(host, []), *ifs]))
    return out


def teardown_argv(keys: Sequence[str], devs: Sequence[str]) -> list[str]:
    """The command that reads what a lab campaign's teardown compares on one host."""
    return read_argv(list(dict.fromkeys([*keys, *TEARDOWN_KEYS])), devs)


def teardown_diff(before: Settings, after: Settings) -> list[str]:
    """Every setting a campaign left different from how it found the host, named (host and
    setting), the BPF congestion controls registered or unregistered meanwhile included."""
    out = []
    for host, b in before.items():
        a = after.get(host, HostSettings())
        have = set(a.sysctls.get(knobs.AVAILABLE_CC, "").split())
        had = set(b.sysctls.get(knobs.AVAILABLE_CC, "").split())
        if added := sorted(have - had):
            out.append(f"{host}: congestion controls registered during the campaign, still "
                       f"registered: {' '.join(added)}")  # fmt: skip
        if gone := sorted(had - have):
            out.append(f"{host}: congestion controls no longer registered: {' '.join(gone)}")
        out += diff({host: b}, {host: a}, ("before", "after"))
    return out
