"""The set-up stage's order on the sender: the ss sampler starts right after the run's
directory is made, before the flush, the captures and the settings, so that its cold Python
start (1.8 s of CPU under emulation) overlaps them instead of following them; its
first-sample wait still comes at the end, before the traffic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mprig.campaign.plan import expand
from mprig.campaign.spec import parse_campaign
from mprig.rig.batch import Batch
from mprig.rig.host import Rig
from mprig.rig.layout import layout
from mprig.run import capture, commands, run_stages
from mprig.run.run_attempt import Attempt

CAMPAIGN = """\
name: order
paths:
  - {name: wifi, kind: wifi, rate_mbit: 20, delay_ms: 10}
  - {name: cell, kind: cellular, rate_mbit: 10, delay_ms: 40}
variants:
  - {name: mptcp}
traffic: {tool: iperf3, direction: %s, duration_s: 5}
"""


def setup_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direction: str) -> Batch:
    run = expand(parse_campaign(CAMPAIGN % direction, "order.yaml"))[0]
    hosts: dict[str, Any] = {h: object() for h in ("client", "server")}
    rig = Rig("t", hosts, layout(run.paths), "10.0.0.1", "virtual-native")  # type: ignore[arg-type]
    a = Attempt(rig, run, tmp_path)
    seen: list[Batch] = []
    monkeypatch.setattr(Attempt, "stage", lambda self, name, b, **kw: seen.append(b) or {})
    run_stages.setup_stage(a, commands.build(run, rig.paths))
    return seen[0]


@pytest.mark.parametrize(("direction", "sender"), [("download", "server"), ("upload", "client")])
def test_the_sampler_starts_first_and_is_waited_for_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direction: str, sender: str
) -> None:
    batch = setup_batch(tmp_path, monkeypatch, direction)
    cmds = batch.by_host[sender]
    sampler = capture.ss_sampler_argv()
    starts = [i for i, c in enumerate(cmds) if c.argv == sampler]
    assert starts == [1], [c.argv[:4] for c in cmds]  # after the run directory (0)
    assert cmds[0].argv[3] == "mprig-dir" and cmds[starts[0]].log.endswith("/ss.txt")
    waits = [
        i for i, c in enumerate(cmds) if c.argv[3:4] == ["mprig-wait"] and "ss.txt" in c.argv[4]
    ]
    assert len(waits) == 1 and waits[0] > max(
        i for i, c in enumerate(cmds) if c.log and c.argv != sampler
    )  # after every other start: the traffic follows the wait
    other = "client" if sender == "server" else "server"
    assert sampler not in [c.argv for c in batch.by_host[other]]
