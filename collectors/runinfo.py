"""What the collectors need from a bundle's run.json (docs/bundle.md), read defensively:
the runner's record is the contract, but a failed run may have written only part of it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RunInfo:
    """One bundle's run.json, with the derived facts the metrics need."""

    bundle: Path  # the run's directory
    record: dict[str, Any]  # run.json as read

    @property
    def run_id(self) -> str:
        return str(self.record.get("run_id") or self.bundle.name)

    @property
    def status(self) -> str:
        return str(self.record.get("status") or "unknown")

    @property
    def direction(self) -> str:
        """download (the server sends) or upload."""
        return str(_dict(self.record.get("traffic")).get("direction") or "download")

    @property
    def tool(self) -> str:
        """iperf3, bulk, blocks, requests or cbr."""
        return str(_dict(self.record.get("traffic")).get("tool") or "iperf3")

    @property
    def receiver(self) -> str:
        return "client" if self.direction == "download" else "server"

    @property
    def sender(self) -> str:
        return "server" if self.direction == "download" else "client"

    @property
    def variant(self) -> dict[str, Any]:
        return _dict(self.record.get("variant"))

    @property
    def mptcp(self) -> bool:
        return bool(self.variant.get("protocol", "mptcp") == "mptcp")

    def path_rates_bps(self) -> dict[str, float]:
        """Path name -> configured rate in the data direction, bits/s."""
        key = "down" if self.direction == "download" else "up"
        out = {}
        for path in _list(self.record.get("paths")):
            rate = _dict(_dict(path).get(key)).get("rate_mbit")
            if isinstance(rate, int | float) and rate > 0 and path.get("name"):
                out[str(path["name"])] = float(rate) * 1e6
        return out

    def client_addrs(self) -> dict[str, str]:
        """Client address -> path name, from `links` (a list of records with `name` or
        `path`, or a mapping path name -> record)."""
        links = self.record.get("links")
        items = links.items() if isinstance(links, dict) else ((None, x) for x in _list(links))
        out = {}
        for name, link in items:
            link = _dict(link)
            path = name or link.get("name") or link.get("path")
            if path and link.get("client_addr"):
                out[str(link["client_addr"])] = str(path)
        return out

    def start_time(self) -> float | None:
        started = _dict(self.record.get("timings")).get("started")
        return float(started) if isinstance(started, int | float) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
