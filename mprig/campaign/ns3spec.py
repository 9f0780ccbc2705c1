"""What `engine: ns3` asks of a path (mprig/campaign/spec.py calls it from Path's check): the ns-3
real-time 802.11 link is the path's whole channel, so netem's own fields cannot apply."""

from __future__ import annotations

from typing import Any

NETEM_ONLY_FIELDS: tuple[str, ...] = ("delay_ms", "jitter_ms", "loss_pct", "reorder_pct")
NETEM_ONLY_FIELDS += ("aqm", "jitter_dist", "ge_p_pct")


def ns3_issue(path: Any) -> str:
    """Why `engine: ns3` cannot carry this path (a spec.Path; "" when it can)."""
    if path.kind != "wifi" or path.distance_m is None:
        return (
            "ns3 simulates one 802.11 link, so it needs kind: wifi and distance_m (the "
            "station's distance to the AP); give both, or use engine: netem (the default)"
        )
    extra = [f for f in NETEM_ONLY_FIELDS for d in (path.down, path.up) if getattr(d, f)]
    if extra:
        return (
            f"ns3 simulates the link's own delay and loss; remove {', '.join(dict.fromkeys(extra))}"
            " (netem's), or use engine: netem"
        )
    if path.down.rate_mbit != path.up.rate_mbit:
        return "ns3 runs one PHY mode per link: give rate_mbit once, at path level"
    return ""
