"""Cross traffic and a shared bottleneck in the VM (Debian's stock kernel: netem, ifb and
act_mirred as modules), judged on measured data. One campaign, one VM boot: two 20 Mbit/s
paths (10 ms each way) converge on a 10 Mbit/s link (5 ms, 50 packets) with a competing
reno flow on one of them, and a UDP flow switched on and off goes up the other; MPTCP runs
once uncoupled (reno) and once coupled (LIA, the BPF program, built in the guest).

- The shared link holds: the connection and the competitor together get 8 to 10.2 Mbit/s
  (each path alone carries 20; without the shared queue they would take more), and its
  netem, read back before and after (tc-bottleneck.txt), shaped at 10 Mbit/s and dropped.
- The competitor's congestion control is reno, read back; the UDP flow's rate is 1 Mbit/s
  half of the time after its 2 s start.
- Uncoupled MPTCP takes more of the link than coupled (the shares are printed; the native
  test, tests/integration/test_cross_traffic_native.py, judges fairness over 6 runs).

About 2.5 minutes under software emulation; run it under `flock /tmp/mprig-vm.lock`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from vmcampaign import campaign_in_vm

from collectors.collect import Options, collect_campaign

# `make test-long`: test_cross_traffic_native.py checks the same behaviour in `make test`
# (tbf for netem); this one adds Debian's kernel (IFB, mirred, netem) for 3.3 min
pytestmark = [pytest.mark.vm, pytest.mark.shared_vm, pytest.mark.long]

CAMPAIGN = """\
name: cross
paths:
  - name: wifi
    kind: wired
    rate_mbit: 20
    delay_ms: 10
    limit_pkts: 100
    cross_traffic: [{kind: tcp, cc: reno}]
  - name: cell
    kind: wired
    rate_mbit: 20
    delay_ms: 10
    limit_pkts: 100
    cross_traffic: [{kind: udp, rate_mbit: 1, direction: upload, start_s: 2, on_s: 1, off_s: 1}]
shared_bottleneck: {paths: [wifi, cell], rate_mbit: 10, delay_ms: 5, limit_pkts: 50}
variants:
  - {name: uncoupled, cc: reno}
  - {name: coupled, cc: lia}
traffic: {duration_s: 12}
capture: {enabled: false}
"""


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, dict[str, Any]]]:
    """variant -> run.json (with its runs.parquet row under `_row`, its text files under
    `_tc`)."""
    with campaign_in_vm(CAMPAIGN, "cross", rig="h4vm", timeout=900) as results:
        collect_campaign(results, Options())
        frame = pd.read_parquet(results / "runs.parquet").set_index("run_id")
        out = {}
        for path in sorted(results.glob("*/run.json")):
            rec = json.loads(path.read_text())
            assert rec["status"] == "complete", rec.get("reason")
            rec["_row"] = dict(frame.loc[rec["run_id"]])
            rec["_tc"] = (path.parent / "tc-bottleneck.txt").read_text()
            out[rec["variant"]["name"]] = rec
        assert sorted(out) == ["coupled", "uncoupled"]
        yield out


def test_the_shared_link_limits_the_connection_and_the_competitor(
    runs: dict[str, dict[str, Any]],
) -> None:
    for name, r in runs.items():
        c = r["cross_traffic"]
        total = c["main_bps"] + c["flows"]["wifi.1"]["throughput_bps"]
        print(f"{name}: MPTCP {c['main_bps'] / 1e6:.2f} Mbit/s, reno"
              f" {c['flows']['wifi.1']['throughput_bps'] / 1e6:.2f}, share"
              f" {c['main_share']:.3f}, Jain {c['jain_index']:.3f}")  # fmt: skip
        assert 8e6 < total < 10.2e6, (name, total)
        assert c["competing"] == ["wifi.1"]  # the UDP flow goes up: another queue
        assert r["_row"]["jain_index"] == pytest.approx(c["jain_index"], rel=1e-6)
        marks = re.findall(r"^# (before|after) ", r["_tc"], re.M)
        devs = re.findall(r"^## (\S+)\nqdisc netem \S+ root .*rate 10Mbit", r["_tc"], re.M)
        dropped = re.findall(r"## mpbtl-down\n.*\n\s*Sent \d+ bytes \d+ pkt \(dropped (\d+)",
                             r["_tc"])  # fmt: skip
        assert (marks, devs) == (["before", "after"], ["mpbtl-down", "mpbtl-up"] * 2), r["_tc"]
        assert int(dropped[-1]) > 0, r["_tc"]  # the shared queue filled: it was the bottleneck
    share = {name: r["cross_traffic"]["main_share"] for name, r in runs.items()}
    assert share["uncoupled"] > share["coupled"], share


def test_the_competing_flows_ran_as_asked(runs: dict[str, dict[str, Any]]) -> None:
    for r in runs.values():
        flows = r["cross_traffic"]["flows"]
        assert (flows["wifi.1"]["cc"], flows["cell.1"]["cc"]) == ("reno", "")
        # 1 Mbit/s one second in two from 2 s on: about 0.42 Mbit/s over 12 s
        assert 0.3e6 < flows["cell.1"]["throughput_bps"] < 0.55e6, flows
