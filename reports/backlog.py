"""What a paper's full profile still needs before every cell holds K runs, and running it
into the committed archives shard by shard (`mprig backlog PAPER`, `make paper-full`).

A full profile plans the paper's repetitions (30 for paper 000), while a verdict needs
n >= K (issue 15 asks for 5). A shard deals each cell's repetitions over its N shards
evenly (mprig/campaign/shard.py), so shard 1 of N = repetitions // K holds at least K of
every cell: that shard, and only it, is the backlog. Its runs are those the archive does
not hold complete: never run, not archived yet, failed, or rig-limited (reports leave
those out, so they are run again and `mprig archive` swaps the clean rerun in).

Each campaign runs as `make paper-shard` does: `mprig run --shard 1/N --skip-archived
--redo-rig-limited --stop-after`, `mprig collect`, `mprig archive`. A run cut short by the
time left stops the whole backlog after archiving what completed; the next call goes on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mprig.errors import UsageError
from reports.paperplans import PAPERS

ROOT = Path(__file__).resolve().parents[1]
PAPERS_DIR = ROOT / "experiments" / "papers"
ARCHIVES = ROOT / "reports" / "archived-runs"
# A run takes its traffic time and this much more without KVM (measured: 004 Fig. 4's
# 60 s runs take 64-70 s; 000 and 003 run 50 s); an estimate for planning, said as such.
OVERHEAD = 1.12
STOPPED = 3  # `mprig run --stop-after` exit status: stopped between runs, runs left


@dataclass(frozen=True)
class Need:
    """What one campaign of the profile still needs."""

    name: str  # the campaign (its archive is ARCHIVES/<name>)
    spec: Path  # experiments/papers/<name>.yaml
    shard: str  # "1/N": holds at least K runs of every cell
    fewest: int  # the fewest complete runs a cell of the archive holds (0: no archive)
    todo: tuple[str, ...]  # run ids of the shard the archive does not hold complete
    run_seconds: float  # traffic time of one run

    @property
    def hours(self) -> float:
        """Estimated machine time of the runs to do, without KVM."""
        return len(self.todo) * self.run_seconds * OVERHEAD / 3600


def needs(paper: str, min_n: int, archives: Path = ARCHIVES) -> list[Need]:
    """One Need per full-profile campaign of PAPER, in the paper's order."""
    if paper not in PAPERS:
        raise UsageError(f"unknown paper {paper!r}; papers: {', '.join(sorted(PAPERS))}")
    out = []
    for stem in PAPERS[paper].campaigns:
        spec = PAPERS_DIR / f"{stem}-full.yaml"
        if spec.is_file():
            out.append(_need(spec, min_n, archives))
    return out


def _need(spec: Path, min_n: int, archives: Path) -> Need:
    from mprig.campaign.shard import Shard, select
    from mprig.run.judge import plan_file

    campaign, plan = plan_file(spec)
    count = max(1, campaign.repetitions // min_n)
    mine = select(plan, Shard(1, count))
    per_cell = Counter(
        (r.variant.name, json.dumps(r.point, sort_keys=True, default=str)) for r in mine
    )
    if min(per_cell.values()) < min_n:
        raise UsageError(
            f"{spec}: plans {campaign.repetitions} repetitions of each cell, fewer than"
            f" --min-n {min_n}; ask for at most {campaign.repetitions}"
        )
    held, fewest = _held(archives / campaign.name)
    todo = tuple(r.run_id for r in mine if r.run_id not in held)
    seconds = float(campaign.traffic.duration_s)
    return Need(campaign.name, spec, f"1/{count}", fewest, todo, seconds)


def _held(archive: Path) -> tuple[set[str], int]:
    """The run ids ARCHIVE holds complete, and the fewest complete runs of a cell."""
    from reports import results
    from reports.reproduce_gaps import cell_runs

    if not (archive / "campaign.json").is_file():
        return set(), 0
    got = results.load(archive)
    return set(got.complete["run_id"].astype(str)), cell_runs(got)[0]


def lines(paper: str, min_n: int, found: Sequence[Need]) -> list[str]:
    """What `mprig backlog PAPER` prints: a line per campaign, then the total."""
    out = []
    for need in found:
        held = f"the fewest complete runs of a cell: {need.fewest}"
        if need.fewest >= min_n:
            out.append(f"{need.name}: {held}: done")
            continue
        out.append(
            f"{need.name}: {held}, shard {need.shard}: {len(need.todo)} runs to go, about"
            f" {need.hours:.1f} h without KVM"
        )
    short = [n for n in found if n.fewest < min_n]
    if not short:
        return [*out, f"paper {paper}: every cell holds {min_n} runs or more"]
    runs, hours = sum(len(n.todo) for n in short), sum(n.hours for n in short)
    return [
        *out,
        f"paper {paper}: {len(short)} of {len(found)} campaigns short of n = {min_n}:"
        f" {runs} runs, about {hours:.1f} h without KVM",
    ]


Mprig = Callable[[list[str]], int]  # runs `mprig ARGS`, returns its exit status


def mprig(args: list[str]) -> int:
    """`mprig ARGS` in a child process, its output on ours."""
    return subprocess.run([sys.executable, "-m", "mprig.cli", *args], check=False).returncode


def run(
    found: Sequence[Need],
    min_n: int,
    stop_after: float | None,
    archives: Path = ARCHIVES,
    results_root: Path = ROOT / "results",
    call: Mprig = mprig,
    say: Callable[[str], None] = print,
) -> int:
    """Run each short campaign's shard, collect it, archive it. 0 when every campaign ran
    its shard whole, 3 when STOP_AFTER (seconds) ran out first, 1 when runs failed."""
    start, status = time.monotonic(), 0
    for need in found:
        if need.fewest >= min_n or not need.todo:
            continue
        args = ["run", str(need.spec), "--shard", need.shard, "--redo-rig-limited"]
        results = results_root / f"shard-{need.shard.replace('/', '-of-')}"
        args += ["--results", str(results)]
        archive = archives / need.name
        if (archive / "campaign.json").is_file():
            args += ["--skip-archived", str(archive)]
        if stop_after is not None:
            left = stop_after - (time.monotonic() - start)
            if left < need.run_seconds * OVERHEAD:
                say(f"mprig: {need.name}: no time left for a run; the next call goes on")
                return STOPPED
            args += ["--stop-after", f"{left:.0f}s"]
        say(f"mprig: {need.name}: shard {need.shard}, {len(need.todo)} runs to go")
        ran = call(args)
        if call(["collect", str(results / need.name)]) != 0:
            say(f"mprig: {need.name}: collect failed; nothing archived (see above)")
            return 1
        if call(["archive", str(results / need.name), str(archive)]) != 0:
            return 1
        if ran == STOPPED:
            return STOPPED
        status = status or (1 if ran else 0)
    return status
