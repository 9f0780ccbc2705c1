"""The stop stage and a traffic server that ends by itself once its one client is done
(iperf3 -s -1; the bulk, blocks and cbr ends): it is given a few round trips of the run's
paths to finish its end-of-test exchange before it is signalled, while what runs until
stopped (tcpdump, the ss sampler, the requests server) is TERMed at once, as before. At
400-800 ms RTT under emulation the TERM used to reach iperf3 mid-exchange: 7 of 100 runs of
004-fig6b-full kept an iperf3-server.json with two JSON documents, or an empty one.

The hosts are this machine, each running the batch script over its own mprig session (the
remote bash loop the rig's hosts run over SSH); the servers are stand-ins (sh and sleep)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from mprig.campaign.plan import Run, expand
from mprig.campaign.spec import parse_campaign
from mprig.rig import batch
from mprig.rig.batch import Batch, Cmd
from mprig.rig.host import Result, Rig
from mprig.rig.layout import layout
from mprig.rig.session import Session, loop_command
from mprig.run import commands, run_stages
from mprig.run.run_attempt import Attempt

PATHS = """\
name: longrtt
paths:
  - {name: fast, kind: wired, rate_mbit: 10, delay_ms: 200}
  - {name: slow, kind: cellular, rate_mbit: 1, delay_ms: 300, up: {delay_ms: 250, jitter_ms: 50}}
variants:
  - {name: mptcp}
"""
SHORT = PATHS
for ms in (200, 250, 300):
    SHORT = SHORT.replace(f"delay_ms: {ms}", "delay_ms: 10")
REQUESTS = (
    "{tool: requests, duration_s: 5, requests: {count: 5, response: {dist: fixed, bytes: 10}}}"
)
CBR = "{tool: cbr, duration_s: 4, cbr: {rate_mbit: 1, fps: 50, deadline_ms: 80}}"

# iperf3 -s -1 at the end of a test: its client has gone, and it writes its JSON one exchange
# later (here 0.5 s); a TERM before that leaves iperf3's interrupt document instead.
ONE_OFF = (
    'trap \'echo interrupted >> "$1"; exit 1\' TERM; sleep 0.5 & wait $!; echo finished >> "$1"'
)


class LocalHost:
    """A rig host that is this machine: scripts over its own real mprig session."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.session = Session(loop_command)

    def script(self, text: str, *, timeout: float = 30) -> Result:
        code, out, err = self.session.run(text, timeout=timeout)
        return Result(("bash",), code, out.decode(), err, 0.0)

    def close(self) -> None:
        self.session.close()


def the_run(
    traffic: str = "{tool: iperf3, duration_s: 5}", timeline: str = "", paths: str = PATHS
) -> Run:
    return expand(parse_campaign(f"{paths}traffic: {traffic}\n{timeline}", "longrtt.yaml"))[0]


def built(run: Run, a: Attempt) -> commands.RunCommands:
    """The run's commands without the routers' qdisc removal (no routers here)."""
    return dataclasses.replace(commands.build(run, a.rig.paths), teardown=[])


@pytest.fixture
def attempt(tmp_path: Path) -> Iterator[Attempt]:
    run = the_run()
    hosts = {h: LocalHost(h) for h in ("client", "server")}
    rig = Rig("t", hosts, layout(run.paths), "10.0.0.1", "virtual-native")  # type: ignore[arg-type]
    try:
        yield Attempt(rig, run, tmp_path)
    finally:
        rig.close()


def start(a: Attempt, tmp: Path, server: list[str]) -> dict[str, int]:
    """The traffic server and, on both hosts, a capture that runs until stopped (sleep),
    started as the set-up stage starts them; their pids by name."""
    b = Batch()
    b.add("client", Cmd(["sleep", "30"], log=str(tmp / "tcpdump-client.log")))
    b.add("server", Cmd(["sleep", "30"], log=str(tmp / "tcpdump-server.log")))
    b.add("server", Cmd(server, log=str(tmp / "traffic-server.log")))
    a.stage("setup", b)
    return {k: pid for pids in a.background.values() for k, pid in pids.items()}


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def stop_log(a: Attempt) -> list[tuple[str, str, int]]:
    """The stop stage's bash commands in run.json `commands`: (host, name, return code)."""
    entries = [
        e for e in a.log if e["argv"][:2] == ["bash", "-c"] and e["argv"][3] != "mprig-nstat"
    ]
    return sorted((e["host"], e["argv"][3], e["returncode"]) for e in entries)


def test_a_one_off_server_finishes_its_exchange_before_the_stop(
    attempt: Attempt, tmp_path: Path
) -> None:
    out = tmp_path / "iperf3-server.json"
    pids = start(attempt, tmp_path, ["sh", "-c", ONE_OFF, "iperf3", str(out)])
    cmds = built(attempt.run, attempt)
    run_stages.stop_stage(attempt, cmds)
    assert out.read_text() == "finished\n"  # not "interrupted": no TERM in its exchange
    assert {name: running(pid) for name, pid in pids.items()} == {
        "tcpdump-client": False, "tcpdump-server": False, "traffic-server": False
    }  # fmt: skip
    assert stop_log(attempt) == [
        ("client", "mprig-stop", 0),
        ("server", "mprig-finish", 0),  # the server ended by itself within its wait
        ("server", "mprig-stop", 0),
    ]


def test_a_one_off_server_still_running_after_its_wait_is_stopped_and_recorded(
    attempt: Attempt, tmp_path: Path
) -> None:
    pids = start(attempt, tmp_path, ["sleep", "30"])  # a server whose client never said done
    cmds = dataclasses.replace(built(attempt.run, attempt), server_wait_s=0.3)
    run_stages.stop_stage(attempt, cmds)
    assert not running(pids["traffic-server"])
    assert stop_log(attempt) == [
        ("client", "mprig-stop", 0),
        ("server", "mprig-finish", 1),  # run.json: the server had to be signalled
        ("server", "mprig-stop", 0),
    ]
    (finish,) = [e for e in attempt.log if e["argv"][3:4] == ["mprig-finish"]]
    assert 0.3 <= finish["seconds"] < 5


def test_a_server_that_runs_until_stopped_is_terminated_at_once(
    attempt: Attempt, tmp_path: Path
) -> None:
    out = tmp_path / "requests-served.json"
    start(attempt, tmp_path, ["sh", "-c", ONE_OFF, "requests-server", str(out)])
    cmds = built(the_run(REQUESTS), attempt)
    run_stages.stop_stage(attempt, cmds)
    assert out.read_text() == "interrupted\n"
    assert stop_log(attempt) == [("client", "mprig-stop", 0), ("server", "mprig-stop", 0)]


IPERF3 = "{tool: iperf3, duration_s: 5}"


@pytest.mark.parametrize(
    ("traffic", "timeline", "paths", "wait_s"),
    [
        # 4 round trips of the longest path: slow's 300 + 250 + 50 ms of jitter = 600 ms
        (IPERF3, "", PATHS, 2.4),
        ("{tool: bulk, bytes: 1000000}", "", PATHS, 2.4),
        ("{tool: blocks, duration_s: 5, block_bytes: 8192, interval_ms: 10}", "", PATHS, 2.4),
        (CBR, "", PATHS, 2.4),
        (REQUESTS, "", PATHS, None),  # it answers until it is stopped
        (IPERF3, "", SHORT, 2.0),  # 4 x 70 ms: the least it is given
        # a delay the timeline sets during the run counts: 700 + 200 ms on fast
        (IPERF3, "timeline: [{at_s: 1, path: fast, action: set, direction: down,"
                 " delay_ms: 700}]\n", PATHS, 3.6),
        (IPERF3, "timeline: [{at_s: 1, path: fast, action: set, delay_ms: 9000}]\n", PATHS,
         30.0),  # the most
    ],
)  # fmt: skip
def test_the_wait_is_a_few_round_trips_of_the_longest_path(
    traffic: str, timeline: str, paths: str, wait_s: float | None
) -> None:
    got = commands.server_wait_s(the_run(traffic, timeline, paths))
    assert got == (None if wait_s is None else pytest.approx(wait_s))


def test_the_waits_bound_reaches_bash_as_a_number_made_here() -> None:
    """Whole microseconds as an argument after the script, never inside it (bash arithmetic
    would run a command substitution inside a number it is given)."""
    assert batch.finish_argv([1234, 99], 3.2)[3:] == ["mprig-finish", "3200000", "1234", "99"]
