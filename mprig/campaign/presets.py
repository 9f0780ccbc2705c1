"""Stack presets by the papers' names: reordering recovery (NoPR, D-SACK, F-RTO, Eifel) as
Linux sysctls, and congestion control (uncoupled, coupled) checked against a kernel.

Papers 000 and 003 compare reordering-recovery mechanisms in the NS-3 MPTCP
model, where each is a separate module on top of a plain NewReno sender ("NoPR"). Linux has
all of them woven into one loss-recovery machine; a preset switches the others off so that
each mechanism works alone on top of the same classic dupthresh-3 sender:

- One SACK setting for every preset of a comparison: SACK on. D-SACK cannot work without
  it, and it is the signal from which Linux (and so `door`) sees reordering; were NoPR and
  PR-R run without it while D-SACK and TCP-DOOR ran with it, the comparison would partly
  measure SACK (a burst of losses repaired by NewReno one segment per round trip). A
  variant can still study SACK as a factor: `sysctls: {tcp_sack: 0}` overrides the preset
  (mprig.stack.knobs applies variant sysctls last), on every variant of that comparison.
- NoPR: SACK-based loss recovery (RFC 6675) with the classic dupthresh of 3
  (`tcp_max_reordering=3`: no adaptive dupthresh), no D-SACK, no F-RTO, no timestamps (so
  no timestamp-based undo), no RACK (`tcp_recovery=0`) and no tail loss probe
  (`tcp_early_retrans=0`): no response to reordering.
- D-SACK (RFC 2883, response per RFC 3708 and Blanton/Allman): NoPR + D-SACK. Linux undoes
  the cwnd reduction when D-SACKs show every retransmission was spurious, and raises the
  dupthresh up to `tcp_max_reordering` (300) when it sees reordering.
- F-RTO (RFC 5682): `tcp_frto=2` on the NoPR base. Linux detects a spurious RTO in the two
  ACKs after it and undoes the RTO's cwnd reduction.
- Eifel (RFC 3522 detection, RFC 4015 response): timestamps on the NoPR base. Linux's undo
  compares the echoed timestamp with the first retransmission's (`tcp_packet_delayed`),
  which is Eifel detection, applied after fast retransmit and after RTO.
- linux: the kernel's own defaults (SACK, D-SACK, F-RTO, timestamps, RACK, TLP, adaptive
  dupthresh): today's stack, used where a paper ran the Linux implementation.

- tcpdoor, prr: TCP-DOOR and PR-R change the sender's response itself. They are BPF
  congestion-control programs (mprig.stack.bpfcc, kernel-configs/bpf: `door`, `prr`) on the NoPR
  base; the preset names the algorithm, and a variant selects it with `cc: tcpdoor` or
  `cc: prr` (see `check_recovery_cc`). TCP-DOOR detects out-of-order delivery from
  sequence numbers in its own option, which no Linux peer sends; SACK blocks are the
  signal from which Linux (and so `door`) sees reordering. Without SACK, Linux notices
  reordering only when duplicate ACKs outnumber the packets in flight, and `door` behaves
  as Reno (tests/integration/test_bpfcc_reorder_vm.py).
- Coupling: `door` and `prr` are Reno per subflow (uncoupled), and a subflow runs one
  congestion control, so a paper row that ran them with coupled increase (paper 000: LIA)
  runs the BPF programs that do both: `prr_lia` and `door_lia` (the same recovery over
  LIA's increase, kernel-configs/bpf/coupled.h); their cc presets are `prr_lia` and
  `tcpdoor_lia`, which the `prr` and `tcpdoor` recovery presets accept. TCP-DOOR under
  FC-CC (paper 003) is `door_fccc` (door's responses over fccc's fully coupled decrease and
  increase), cc preset `tcpdoor_fccc`, which the `tcpdoor` recovery preset accepts too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from mprig.errors import UsageError


@dataclass(frozen=True)
class RecoveryPreset:
    """A reordering-recovery preset: the papers' mechanism as exact Linux sysctls."""

    name: str  # the Variant.recovery value
    paper_name: str  # as the papers write it
    sysctls: Mapping[str, str]  # full sysctl name -> value, set on client and server
    differs: str  # how Linux's mechanism differs from the papers' NS-3 model
    cc: str | None = None  # the cc preset the mechanism is (PR-R, TCP-DOOR); None: any
    coupled_cc: str | None = None  # the same mechanism over LIA's coupled increase
    fully_coupled_cc: str | None = None  # the same mechanism over FC-CC (fully coupled)


def _knobs(**values: int) -> Mapping[str, str]:
    return MappingProxyType({f"net.ipv4.{k}": str(v) for k, v in values.items()})


# Every preset sets the same keys, so one run's preset never leaks into the next.
_CLASSIC = {"tcp_recovery": 0, "tcp_early_retrans": 0, "tcp_reordering": 3}
_NOPR = {"tcp_sack": 1, "tcp_dsack": 0, "tcp_frto": 0, "tcp_timestamps": 0, **_CLASSIC}

RECOVERY_PRESETS: Mapping[str, RecoveryPreset] = MappingProxyType(
    {
        "nopr": RecoveryPreset(
            "nopr",
            "NoPR",
            _knobs(**_NOPR, tcp_max_reordering=3),
            "Linux still enters fast recovery with PRR (RFC 6937) rather than NewReno "
            "halving, and its cwnd reduction applies per subflow as in NS-3.",
        ),
        "dsack": RecoveryPreset(
            "dsack",
            "D-SACK",
            _knobs(**{**_NOPR, "tcp_dsack": 1}, tcp_max_reordering=300),
            "Linux undoes the reduction on D-SACK and raises the dupthresh adaptively; the "
            "papers' NS-3 D-SACK grows cwnd on both the D-SACK and the later cumulative ACK "
            "(their 'double increase'), which Linux does not.",
        ),
        "frto": RecoveryPreset(
            "frto",
            "F-RTO",
            _knobs(**{**_NOPR, "tcp_frto": 2}, tcp_max_reordering=3),
            "Linux's F-RTO is RFC 5682's basic algorithm with an undo response; NS-3's "
            "model ends after detection with the conservative response.",
        ),
        "eifel": RecoveryPreset(
            "eifel",
            "Eifel",
            _knobs(**{**_NOPR, "tcp_timestamps": 1}, tcp_max_reordering=3),
            "Linux has no Eifel switch: its timestamp-based undo is Eifel detection with a "
            "restore-cwnd response, applied in fast recovery and after RTO; the RTO itself "
            "is not adapted as RFC 4015 asks.",
        ),
        "linux": RecoveryPreset(
            "linux",
            "Linux default",
            _knobs(
                tcp_sack=1,
                tcp_dsack=1,
                tcp_frto=2,
                tcp_timestamps=1,
                tcp_recovery=1,
                tcp_early_retrans=3,
                tcp_reordering=3,
                tcp_max_reordering=300,
            ),
            "All of Linux's mechanisms at once (RACK-TLP, D-SACK and timestamp undo, F-RTO, "
            "adaptive dupthresh): no single NS-3 model corresponds.",
        ),
        "tcpdoor": RecoveryPreset(
            "tcpdoor",
            "TCP-DOOR",
            _knobs(**_NOPR, tcp_max_reordering=3),
            "SACK is the detection signal: the BPF algorithm `door` detects reordering "
            "from Linux's own signals (tp->reord_seen from SACK blocks, spurious-"
            "retransmission undo) instead of TCP-DOOR's ADSN/TPSN option, and suspends only "
            "fast-recovery reductions (not RTO) for one RTT.",
            cc="tcpdoor",
            coupled_cc="tcpdoor_lia",
            fully_coupled_cc="tcpdoor_fccc",
        ),
        "prr": RecoveryPreset(
            "prr",
            "PR-R",
            _knobs(**_NOPR, tcp_max_reordering=3),
            "the BPF algorithm `prr` keeps cwnd on entering fast recovery; Linux's PRR still "
            "paces the retransmissions by packet conservation during recovery.",
            cc="prr",
            coupled_cc="prr_lia",
        ),
    }
)


def recovery_sysctls(name: str) -> dict[str, str]:
    """The exact sysctls (full names) a reordering-recovery preset sets."""
    if name in RECOVERY_PRESETS:
        return dict(RECOVERY_PRESETS[name].sysctls)
    known = ", ".join(RECOVERY_PRESETS)
    raise UsageError(f"recovery {name!r} is not a preset (known: {known})")


@dataclass(frozen=True)
class CCPreset:
    """A congestion-control preset by the papers' name."""

    name: str  # the Variant.cc value
    paper_name: str  # Un-CC, Co-CC, FC-CC, ...
    algorithm: str | None  # net.ipv4.tcp_congestion_control value; None: none exists
    note: str


_OUT_OF_TREE = (
    "upstream Linux MPTCP (net/mptcp, 5.6+) has no coupled congestion control; it exists "
    "only in the out-of-tree multipath-tcp.org kernel (see kernel-configs/)"
)

_BPF = (
    "a BPF struct_ops program in kernel-configs/bpf, built and registered by mprig at "
    "campaign start (needs clang, bpftool, libbpf-dev and kernel BTF; see `mprig doctor`)"
)

CC_PRESETS: Mapping[str, CCPreset] = MappingProxyType(
    {
        "uncoupled": CCPreset(
            "uncoupled", "Un-CC", "reno", "each subflow runs its own Reno, as the papers' Un-CC"
        ),
        "uncoupled_cubic": CCPreset(
            "uncoupled_cubic", "Un-CC (CUBIC)", "cubic", "each subflow runs the kernel default"
        ),
        "lia": CCPreset("lia", "Co-CC (RFC 6356 LIA)", "lia", _BPF),
        "olia": CCPreset("olia", "OLIA", "olia", _BPF),
        "balia": CCPreset("balia", "BALIA", "balia", _OUT_OF_TREE),
        "wvegas": CCPreset("wvegas", "wVegas", "wvegas", _OUT_OF_TREE),
        "fccc": CCPreset("fccc", "FC-CC", "fccc", _BPF),
        "fully_coupled": CCPreset("fully_coupled", "FC-CC", "fccc", _BPF),
        "prr": CCPreset("prr", "PR-R", "prr", _BPF),
        "tcpdoor": CCPreset("tcpdoor", "TCP-DOOR", "door", _BPF),
        "prr_lia": CCPreset("prr_lia", "PR-R over Co-CC (LIA)", "prr_lia", _BPF),
        "tcpdoor_lia": CCPreset("tcpdoor_lia", "TCP-DOOR over Co-CC (LIA)", "door_lia", _BPF),
        "tcpdoor_fccc": CCPreset("tcpdoor_fccc", "TCP-DOOR over FC-CC", "door_fccc", _BPF),
        "cwa": CCPreset("cwa", "CWA-MPTCP", "cwa", _BPF),
    }
)


@dataclass(frozen=True)
class CCCheck:
    """Whether a congestion-control choice can run on a host, and why not."""

    name: str  # as asked (a preset or a kernel algorithm name)
    algorithm: str | None  # the kernel algorithm it maps to
    available: bool
    reason: str  # empty when available


# Kernel algorithms whose increase couples the subflows of one MPTCP connection.
COUPLED_ALGORITHMS = frozenset({"lia", "olia", "balia", "wvegas", "cwa", "prr_lia", "door_lia"})


# Kernel algorithms that couple both the increase and the decrease over the total window.
FULLY_COUPLED_ALGORITHMS = frozenset({"fccc", "door_fccc"})


def coupling(cc: str) -> str:
    """How a cc couples subflows: "coupled" (RFC 6356 LIA and kin, CWA's LIA increase),
    "fully_coupled" (the papers' FC-CC, BPF fccc and door_fccc), or "uncoupled" (every
    subflow on its own: Reno, CUBIC, and the BPF prr and door, which are Reno per subflow)."""
    preset = CC_PRESETS.get(cc)
    algorithm = preset.algorithm if preset is not None and preset.algorithm else cc
    if algorithm in FULLY_COUPLED_ALGORITHMS:
        return "fully_coupled"
    return "coupled" if algorithm in COUPLED_ALGORITHMS else "uncoupled"


def cc_algorithm(name: str) -> str:
    """The tcp_congestion_control value of a preset or a plain algorithm name."""
    preset = CC_PRESETS.get(name)
    if preset is None:
        return name
    if preset.algorithm is None:
        raise UsageError(f"cc {name!r} ({preset.paper_name}): {preset.note}")
    return preset.algorithm


def parse_available_cc(text: str) -> tuple[str, ...]:
    """Parse /proc/sys/net/ipv4/tcp_available_congestion_control."""
    return tuple(text.split())


def check_cc(name: str, available: Iterable[str]) -> CCCheck:
    """Check a cc preset or algorithm against a host's available algorithms."""
    preset = CC_PRESETS.get(name)
    have = tuple(available)
    if preset is not None and preset.algorithm is None:
        return CCCheck(name, None, False, f"{preset.paper_name}: {preset.note}")
    algorithm = preset.algorithm if preset is not None and preset.algorithm else name
    if algorithm in have:
        return CCCheck(name, algorithm, True, "")
    why = f"{algorithm!r} is not in tcp_available_congestion_control ({' '.join(have)})"
    if preset is not None and preset.note in (_OUT_OF_TREE, _BPF):
        why += f": {preset.note}"
    return CCCheck(name, algorithm, False, why)


def check_recovery_cc(recovery: str | None, cc: str) -> None:
    """A recovery preset that is a congestion control (PR-R, TCP-DOOR) needs that cc."""
    preset = RECOVERY_PRESETS.get(recovery or "")
    if preset is None or preset.cc is None:
        return
    allowed = [c for c in (preset.cc, preset.coupled_cc, preset.fully_coupled_cc) if c is not None]
    if cc_algorithm(cc) in {cc_algorithm(c) for c in allowed}:
        return
    raise UsageError(
        f"recovery {preset.name!r} ({preset.paper_name}) is the congestion control "
        f"{cc_algorithm(preset.cc)!r}: set `cc: {preset.cc}` in the variant (it has cc: {cc})"
    )
