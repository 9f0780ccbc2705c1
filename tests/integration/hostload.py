"""The machine's CPU over a native measurement, for its failure message: a transfer that
came out slow while the hypervisor ran something else on this machine's CPUs (steal) or
other work kept them busy is told from a rig or MPTCP problem. Two native checks failed
once each in a clean-clone CI on a machine that was otherwise quiet, with steal time
recorded since boot but no figure for that window."""

from __future__ import annotations

from mprig.run import headroom


class HostLoad:
    """Starts measuring when made; `stop()` ends it; str(): `busy 41%, steal 3%` (of all
    CPUs' time in between), or `not measured`."""

    def __init__(self) -> None:
        self.before = headroom.read_local()
        self.after: headroom.CpuTimes | None = None

    def stop(self) -> HostLoad:
        self.after = headroom.read_local()
        return self

    def __repr__(self) -> str:
        before, after = self.before, self.after
        if before is None or after is None or after.total <= before.total:
            return "not measured"
        busy = headroom.busy_share(before, after) or 0.0
        steal = (after.steal - before.steal) / (after.total - before.total)
        return f"busy {busy:.0%}, steal {steal:.0%}"
