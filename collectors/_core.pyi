"""Type stub of the compiled core (collectors/_core.c)."""

from typing import Any

def analyze(path: str) -> dict[str, Any]:
    """Replay every MPTCP connection of a pcap/pcapng capture (see collectors/analyze.py)."""

def derive(key: int, version: int) -> tuple[int, int]:
    """(token, IDSN) of an MPTCP key: SHA-1 for version 0, SHA-256 for version 1."""
