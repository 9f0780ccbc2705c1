"""The bulk transfer program end to end over loopback MPTCP: both ends hash what they sent
and received, and the runner's check accepts matching and rejects short transfers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from mprig.run import traffic


def transfer(tmp_path: Path, nbytes: int, *, mptcp: bool) -> tuple[dict[str, object], ...]:
    sent, received = tmp_path / "sent.json", tmp_path / "received.json"
    listen = traffic.bulk_argv(
        "listen", "127.0.0.1", nbytes, 42, mptcp=mptcp, send=True, out=str(sent)
    )
    with subprocess.Popen(listen, stdout=subprocess.PIPE, text=True) as server:
        assert server.stdout is not None and server.stdout.readline() == "listening\n"
        client = traffic.bulk_argv(
            "connect", "127.0.0.1", nbytes, 42, mptcp=mptcp, send=False, out=str(received),
            bind="127.0.0.1",
        )  # fmt: skip
        subprocess.run(client, check=True, timeout=60)
        assert server.wait(timeout=60) == 0
    return json.loads(sent.read_text()), json.loads(received.read_text())


def test_bulk_mptcp_hashes_match(tmp_path: Path) -> None:
    sent, received = transfer(tmp_path, 2_000_001, mptcp=True)
    assert (sent["bytes"], received["bytes"]) == (2_000_001, 2_000_001)
    assert sent["sha256"] == received["sha256"]
    assert traffic.check_bulk(sent, received, 2_000_001) is None


def test_bulk_tcp_and_a_short_transfer_is_caught(tmp_path: Path) -> None:
    sent, received = transfer(tmp_path, 1000, mptcp=False)
    assert sent["sha256"] == received["sha256"]
    assert traffic.check_bulk(sent, received, 1001) == "bulk: sent 1000 received 1000 of 1001 bytes"
