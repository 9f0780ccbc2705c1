"""The rig side of a reproduction report's setup differences: which of the papers' congestion
controls the rig's kernel offers, the exact sysctls of each reordering preset, and what the
Wi-Fi model applies per distance, and which kernels a campaign's runs ran on. Pure: Markdown
lines out."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from reports.tables import markdown_table

if TYPE_CHECKING:
    from reports.results import Results


def run_kernel(bundle: dict[str, Any]) -> str:
    """The kernel a run ran on, from its run.json's hosts: one release, or the hosts'
    different releases joined with ', ' (a lab whose client and server differ)."""
    hosts = bundle.get("hosts") or {}
    found = {str((h or {}).get("kernel", "unrecorded")) for h in hosts.values()}
    return ", ".join(sorted(found)) or "unrecorded"


def kernel_counts(results: Results) -> dict[str, int]:
    """A campaign's complete runs per kernel (run_kernel), by release."""
    ids = results.complete["run_id"].map(str)
    return dict(sorted(Counter(run_kernel(results.bundles.get(r, {})) for r in ids).items()))


def kernel_lines(counts: dict[str, int]) -> list[str]:
    """A campaign whose complete runs span kernels (a host updated between two shards of a
    full profile) says so under its heading; one kernel says nothing."""
    if len(counts) < 2:
        return []
    each = ", ".join(f"{k} ({n} runs)" for k, n in counts.items())
    return [
        f"Its complete runs ran on {len(counts)} kernels: {each}. Its tables pool them; "
        "metrics.csv's `kernel` column splits them.",
        "",
    ]


def run_attempts(bundle: dict[str, Any]) -> int:
    """How many attempts a run took (run.json `attempts`; 1 where a run.json predates it)."""
    return int(bundle.get("attempts") or 1)


def retry_lines(results: Results) -> list[str]:
    """A campaign whose complete runs include retried ones (the runner keeps the attempt
    that finished after one failed or hung) says how many per point: those cells sample
    only the attempts that finished. No retry says nothing."""
    from reports.results import point_label

    per_point: dict[str, tuple[dict[str, Any], list[int]]] = {}
    why: list[str] = []  # every discarded attempt's reason, for reason_lines
    ids = results.complete["run_id"].map(str)
    for run_id in ids:
        bundle = results.bundles.get(run_id, {})
        point = bundle.get("point") or {}
        _, counts = per_point.setdefault(point_label(point), (point, [0, 0]))
        counts[0] += run_attempts(bundle) > 1
        counts[1] += 1
        why += retry_reasons(bundle)
    retried = sum(counts[0] for _, counts in per_point.values())
    if not retried:
        return []
    order = sorted(per_point.items(), key=lambda item: _key(item[1][0]))
    each = "; ".join(f"{label}: {n} of {m}" for label, (_, (n, m)) in order if n)
    return [
        f"{retried} of its {len(ids)} complete runs needed more than one attempt (an earlier "
        f"attempt failed or hung and was discarded; metrics.csv's `attempts` column): {each}. "
        "Those cells hold only the attempts that finished.",
        *reason_lines(why),
        "",
    ]


def retry_reasons(bundle: dict[str, Any]) -> list[str]:
    """Why a run's discarded attempts ended (run.json `earlier_attempts`; none where a
    run.json predates it)."""
    return [str(e.get("reason", "")) for e in bundle.get("earlier_attempts") or []]


def reasons_cell(bundle: dict[str, Any]) -> str:
    """metrics' `retry_reasons`: the JSON list of retry_reasons, empty for none."""
    reasons = retry_reasons(bundle)
    return json.dumps(reasons) if reasons else ""


REASON_CHARS, REASON_KINDS = 160, 3


def reason_lines(reasons: list[str]) -> list[str]:
    """One sentence quoting why discarded attempts ended: reasons that differ only in their
    numbers (a port, a time) are one kind, quoted as first seen with its count, the most
    frequent first, at most REASON_KINDS kinds and REASON_CHARS characters each."""
    if not reasons:
        return []
    kinds: dict[str, list[str]] = {}
    for r in reasons:
        kinds.setdefault(re.sub(r"\d+", "N", r), []).append(r)
    order = sorted(kinds.values(), key=len, reverse=True)  # stable: ties as first seen
    each = "; ".join(f"{len(rs)} × {_code(rs[0])}" for rs in order[:REASON_KINDS])
    more = len(order) - REASON_KINDS
    each += f"; {more} more {'kind' if more == 1 else 'kinds'} (each run.json)" if more > 0 else ""
    return [f"The discarded attempts ended so (run.json `earlier_attempts`): {each}."]


def _code(text: str) -> str:
    """TEXT cut to REASON_CHARS as Markdown inline code (double backticks if it has one)."""
    text = " ".join(text.split())
    if len(text) > REASON_CHARS:
        text = text[: REASON_CHARS - 3] + "..."
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _key(point: dict[str, Any]) -> tuple[tuple[int, float, str], ...]:
    """A point's sort key: numbers by value (100 m after 20 m), anything else by its text."""
    key = []
    for value in point.values():
        number = isinstance(value, int | float) and not isinstance(value, bool)
        key.append((0, float(value), "") if number else (1, 0.0, str(value)))
    return tuple(key)


def wifi_model_lines(distances: tuple[float, ...] = (10, 30, 50, 70, 80, 90, 100)) -> list[str]:
    """What the Wi-Fi model applies per distance for the papers' three PHY modes."""
    from mprig.campaign import wifi

    rows = []
    for standard, rate in (("11g", 54.0), ("11g", 6.0), ("11b", 2.0)):
        for d in distances:
            est = wifi.link(d, standard, rate)  # type: ignore[arg-type]
            rows.append(
                {
                    "PHY": f"{standard} {rate:g}",
                    "distance m": f"{d:g}",
                    "mean SNR dB": f"{est.mean_snr_db:.1f}",
                    "frame error": f"{est.frame_error:.3f}",
                    "netem rate Mbit/s": f"{est.netem_rate_mbit:.2f}",
                    "netem loss %": f"{est.loss_pct:.3g}",
                }
            )
    return markdown_table(rows)


def cc_lines(
    available: tuple[str, ...] | None, per_campaign: dict[str, tuple[str, ...] | None] | None = None
) -> list[str]:
    """Congestion-control availability of the papers' controllers on the rig's kernel:
    AVAILABLE, what every campaign's hosts offered, and PER_CAMPAIGN, what each campaign's
    offered (a BPF program is registered for the campaigns whose variants use it, so a
    controller one campaign ran is not "unavailable" because another did not load it)."""
    from mprig.campaign import presets

    if available is None:
        return ["(unknown: no host recorded net.ipv4.tcp_available_congestion_control)"]
    out = [f"Kernel offers: {' '.join(available)}.", ""]
    loaded: dict[str, list[str]] = {}  # algorithm -> the campaigns that had it
    for campaign, offered in (per_campaign or {}).items():
        for algorithm in offered or ():
            if algorithm not in available:
                loaded.setdefault(algorithm, []).append(campaign)
    if loaded:
        groups: dict[tuple[str, ...], list[str]] = {}  # the same campaigns: one group
        for algorithm, campaigns in loaded.items():
            groups.setdefault(tuple(campaigns), []).append(algorithm)
        some = "; ".join(f"{' '.join(a)} ({', '.join(c)})" for c, a in groups.items())
        out += [f"Registered only for the campaigns whose variants use them: {some}.", ""]
    for name in ("uncoupled", "lia", "olia", "fully_coupled", "prr", "tcpdoor", "cwa"):
        c = presets.check_cc(name, available)
        if c.available:
            status = "available"
        elif c.algorithm in loaded:
            status = f"available to {', '.join(loaded[c.algorithm])}"
        else:
            status = f"unavailable: {c.reason}"
        out.append(f"- {presets.CC_PRESETS[name].paper_name} (`{name}`): {status}")
    return out


def preset_lines() -> list[str]:
    """Each reordering preset: its exact sysctls and how it differs from NS-3."""
    from mprig.campaign import presets

    out = []
    for p in presets.RECOVERY_PRESETS.values():
        knobs = ", ".join(f"{k.removeprefix('net.ipv4.')}={v}" for k, v in p.sysctls.items())
        out.append(f"- **{p.paper_name}** (`{p.name}`): {knobs}. {p.differs}")
    return out
