"""The campaign runner: every planned run, over SSH, into a verified bundle.

Per run: apply the variant and impairments, start captures and the ss sampler, run the
traffic, stop everything, fetch artifacts into `.<run-id>.partial/`, write run.json with
the sha256 of every artifact, rename into place. Infrastructure failures are retried a
bounded number of times; SIGINT/SIGTERM tear the current run down and record it as
interrupted. See docs/running.md.

This module is the loop: the campaign, one run with its retries, one attempt's stages in
order. The pieces are run_attempt.py (Attempt, Outcome, Context, failures), run_stages.py
(set-up, read-back, traffic, stop, teardown), run_fetch.py (artifacts and what is read
from them), run_record.py (run.json), run_rigstate.py (facts, sweep, baseline) and
run_signals.py (SIGINT/SIGTERM).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mprig import startup
from mprig.campaign.plan import Run
from mprig.campaign.spec import Campaign
from mprig.errors import HostError, ToolMissing
from mprig.fsio import exclusive as exclusive  # the campaign and rig locks (cmd_run)
from mprig.rig import ns3link
from mprig.rig.host import Rig
from mprig.run import bundle, commands, latency, timeline, traffic
from mprig.run.crossflow import cross_record
from mprig.run.progress import Reporter
from mprig.run.run_attempt import Attempt, Context, Outcome, OutOfSpace, RunFailed
from mprig.run.run_fetch import capture_drops, fetch_stage, ss_interval, summarise
from mprig.run.run_record import make_record, write_partial_record
from mprig.run.run_rigstate import host_facts, restore_baseline, sweep_rig, take_baseline
from mprig.run.run_signals import Interrupted, signals_as_exceptions, signals_deferred
from mprig.run.run_stages import (
    check_settings,
    rig_cpu,
    rig_cpu_reader,
    set_attenuation,
    setup_stage,
    stop_stage,
    teardown,
    traffic_stage,
)
from mprig.run.stop_after import Budget
from mprig.stack import userpm


def attempt_run(a: Attempt, cmds: commands.RunCommands, out: Outcome) -> None:
    """One attempt, start to fetched artifacts (teardown is the caller's)."""
    out.attenuation = set_attenuation(a.run, a.rig.attenuators)
    with ns3link.running(a.rig, a.run.paths, a.run.seed, a.staging) as engines:
        setup_stage(a, cmds)
        check_settings(a, cmds, out)
        cpu = rig_cpu_reader(a)
        before = cpu()
        out.traffic_s = traffic_stage(a, cmds)
        end = time.time()  # competing flows are measured over the traffic's window
        out.rig_cpu = rig_cpu(a, before, cpu())
    out.engine = engines.summary
    stop_stage(a, cmds)
    fetch_stage(a)
    if why := userpm.problem(a.staging, a.run):  # mptcpd died or never heard MPTCP events
        raise RunFailed(why, transient=False)
    out.drops = capture_drops(a)
    out.ss_interval = ss_interval(a)
    out.summary = summarise(a)
    window = traffic.load_window(a.run.traffic, out.traffic_s, end)
    out.summary |= latency.run_summary(a.staging, a.run, window)
    out.cross = cross_record(a.staging, a.run, window, out.summary)
    out.timeline = timeline.record(a.staging, a.run, a.rig.paths, a.rig.attenuators)


def execute(ctx: Context, run: Run) -> dict[str, Any]:
    """Run one planned run with retries; returns its run.json record (bundle committed)."""
    check_space(ctx)
    started, attempts = time.time(), 0
    record: dict[str, Any] = {}
    earlier: list[dict[str, Any]] = []  # the attempts discarded, and why (a hang, a lost host)
    while True:
        attempts += 1
        record = one_attempt(ctx, run, attempts)
        transient, known = record.pop("_transient", False), record.pop("_hashed", {})
        if record["status"] == "complete" or not transient:
            break
        if attempts > ctx.retries:
            record["reason"] += f" (gave up after {attempts} attempts)"
            break
        earlier.append({"attempt": attempts, "reason": record["reason"]})
        ctx.reporter.retry(run.run_id, attempts + 1, record["reason"])
    record["attempts"] = attempts
    if earlier:
        record["earlier_attempts"] = earlier
    record["timings"]["started"] = round(started, 3)
    record["timings"]["traffic_timeout_s"] = traffic.run_timeout_s(run.traffic, run.paths)
    record["timings"]["ended"] = round(time.time(), 3)
    record["timings"]["overhead_s"] = round(
        record["timings"]["ended"] - started - record["timings"]["traffic_s"], 3
    )
    with signals_deferred():
        bundle.commit(ctx.results, run.run_id, record, known)
    return record


def one_attempt(ctx: Context, run: Run, number: int) -> dict[str, Any]:
    """One attempt; always tears down; returns a record (status complete/failed)."""
    staging = bundle.partial_dir(ctx.results, run.run_id)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    routers = tuple(dict.fromkeys(link.router for link in ctx.rig.paths))
    a = Attempt(ctx.rig, run, staging, routers=routers, baseline=ctx.baseline)
    cmds: commands.RunCommands | None = None
    out = Outcome()
    try:
        cmds = commands.build(
            run,
            ctx.rig.paths,
            server_addr=ctx.rig.server_addr,
            rig=ctx.rig.name,
            iperf3_mptcp_flag=ctx.iperf3_mptcp_flag,
            radio_paths=frozenset(ctx.rig.attenuators),
            lab=ctx.rig.mode == "lab",
        )
        attempt_run(a, cmds, out)
        status, reason, transient = "complete", "", False
        cmds = None  # torn down by the stop stage already
    except (RunFailed, ToolMissing, HostError) as e:
        status, reason = "failed", str(e)
        transient = isinstance(e, ToolMissing) or bool(getattr(e, "transient", False))
    except Interrupted as e:
        with signals_deferred(reraise=False):
            teardown(a, cmds)
            write_partial_record(ctx, run, a, out, f"interrupted by {e}")
        raise
    except BaseException:
        _teardown_quietly(a, cmds)
        raise
    if cmds is not None or a.background:
        _teardown_quietly(a, cmds)
    record = make_record(ctx, run, a, out, status, reason)
    record["_transient"] = transient  # both taken out of the record by execute()
    record["_hashed"] = a.hashed
    return record


def _teardown_quietly(a: Attempt, cmds: commands.RunCommands | None) -> None:
    with signals_deferred():
        teardown(a, cmds)


def check_space(ctx: Context) -> None:
    """Refuse to start a run with too little free space for its artifacts."""
    free = shutil.disk_usage(ctx.results).free
    if free < ctx.min_free_bytes:
        raise OutOfSpace(
            f"{ctx.results}: {free >> 20} MiB free, below {ctx.min_free_bytes >> 20} MiB; "
            "free space and rerun (completed runs are kept)"
        )


@dataclass(frozen=True)
class CampaignResult:
    """How a campaign went."""

    complete: int  # complete at the end: verified before the start, or committed since
    failed: int  # runs recorded failed in this invocation
    skipped: int  # runs already complete before this invocation
    interrupted: int | None  # signal number if interrupted
    left: int = 0  # runs not started because the --stop-after budget was spent


def run_campaign(
    campaign: Campaign,
    runs: list[Run],
    rig: Rig,
    results: Path,
    reporter: Reporter,
    *,
    force: bool = False,
    redo_rig_limited: bool = False,
    budget: Budget | None = None,
) -> CampaignResult:
    """Run every planned run that has no verified bundle yet (all with force; with
    redo_rig_limited also the complete runs whose rig was saturated); with a budget
    (`--stop-after`), none that is expected to end after it."""
    decisions = {
        r.run_id: bundle.decide(results, r.run_id, force=force, redo_rig_limited=redo_rig_limited)
        for r in runs
    }
    todo = [r for r in runs if decisions[r.run_id].action == "run"]
    for name in bundle.clean_leftovers(results):
        reporter.message(f"removed {name}: the staging of a run an earlier campaign did not "
                         "finish (stopped, killed or crashed); that run runs again")  # fmt: skip
    startup.mark("bundle check")
    sweep_rig(rig)
    facts, flag = host_facts(rig)
    base = take_baseline(rig, [r.variant for r in runs], reporter)
    startup.mark("baseline")
    ctx = Context(campaign, rig, results, reporter, facts, flag, base)
    reporter.campaign_start(
        campaign.name, len(runs), len(runs) - len(todo), rig=rig.name, mode=rig.mode,
        startup_s=startup.phases(),
    )  # fmt: skip
    # Complete at the end: those verified before the start and those committed since (each
    # hashed as it was committed), not every bundle hashed again: that read each capture
    # back and took minutes under VM emulation (4.5 min after 105 runs of 000 scenario 1).
    done, failed, left = len(runs) - len(todo), 0, 0
    current: Run | None = None  # the run in progress
    with signals_as_exceptions():
        try:
            for i, run in enumerate(todo):
                if budget is not None and not budget.room_for(run):
                    left = len(todo) - i
                    reporter.message(budget.stop_message(run, left))
                    break
                t0, current = time.monotonic(), run
                status = run_one(ctx, run, decisions[run.run_id].reason)
                current = None
                done, failed = done + (status == "complete"), failed + (status != "complete")
                if budget is not None:
                    budget.timed(time.monotonic() - t0)
        except Interrupted as e:
            reporter.campaign_end(status="interrupted", signal=e.signum)
            if current is not None:  # the signal may have come after its commit
                done += bundle.verify(results / current.run_id).ok
            return CampaignResult(done, failed, len(runs) - len(todo), e.signum)
        except OutOfSpace as e:
            reporter.campaign_end(status="stopped", reason=str(e))
            raise
        finally:
            with contextlib.suppress(HostError), signals_deferred(reraise=False):
                sweep_rig(rig)
                restore_baseline(rig, base, reporter)
            rig.close()
    if left:
        reporter.campaign_end(status="stopped", failed=failed, left=left, reason="--stop-after")
    else:
        reporter.campaign_end(status="done", failed=failed)
    return CampaignResult(done, failed, len(runs) - len(todo), None, left)


def run_one(ctx: Context, run: Run, reason: str) -> str:
    """Execute one run and report it; returns its status (`complete` once committed)."""
    ctx.reporter.run_start(run.run_id, run.index, reason)
    t0 = time.monotonic()
    try:
        record = execute(ctx, run)
    except Interrupted as e:
        done = bundle.verify(ctx.results / run.run_id).ok  # the signal came after the commit
        status, why = ("complete", "") if done else ("interrupted", f"interrupted by {e}")
        ctx.reporter.run_end(run.run_id, status, time.monotonic() - t0, why)
        raise
    except OutOfSpace as e:
        ctx.reporter.run_end(run.run_id, "failed", time.monotonic() - t0, str(e))
        raise
    status = record["status"]
    ctx.reporter.run_end(run.run_id, status, time.monotonic() - t0, record.get("reason", ""))
    return str(status)
