"""`mprig run`: run a campaign into verified bundles (`mprig status` shows them:
mprig/cli/cmd_status.py)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mprig import startup
from mprig.campaign.shard import parse_shard
from mprig.cli.cmd_status import print_summary
from mprig.rig.layout import DEFAULT_RIG
from mprig.run.stop_after import parse_duration

RUN_EPILOG = """\
examples:
  mprig run experiments/smoke.yaml
      bring the virtual rig up, run the 6 smoke runs, tear the rig down; results in
      results/smoke/ (VM mode is chosen automatically where the kernel lacks sch_netem)
  mprig run experiments/smoke.yaml            run it again: verified runs are skipped,
                                              failed, interrupted and partial ones redone
  mprig run experiments/smoke.yaml --force    rerun every run
  mprig run experiments/smoke.yaml --redo-rig-limited
      rerun only the complete runs flagged rig_limited (the host's CPU was saturated)
  mprig run experiments/nightly.yaml --results /srv/results --log-json 2> events.log
  mprig run experiments/smoke.yaml --no-vm --rig lab1
  mprig run experiments/smoke.yaml --shard 1/2 --rig a --results results-a
  mprig run experiments/smoke.yaml --shard 2/2 --rig b --results results-b
      split the plan over two rigs (here two virtual rigs on one machine; the same on two
      lab rigs with --inventory): each runs its part, with the plan's run ids and seeds;
      then `mprig merge results/smoke results-a/smoke results-b/smoke` joins them
  mprig run F.yaml --shard 2/15 --skip-archived reports/archived-runs/NAME
      leave out the runs a committed archive (`mprig archive`) holds: a full profile in
      parts on fresh machines (`make paper-shard`, docs/papers.md)
  mprig run F.yaml --stop-after 2h
      run what fits in two hours and stop between runs (exit 3); run it again to go on
exit status: 0 every run complete, 1 some run failed, 2 bad input, 3 stopped by
--stop-after with runs left (none failed), 130/143 interrupted
"""


def register(subparsers: Any) -> None:
    """Add the `run` command (`status` is mprig/cli/cmd_status.py)."""
    raw = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser(
        "run",
        help="run a campaign (resumes where it stopped)",
        description="Run every run of a campaign on the rig into verified bundles.",
        epilog=RUN_EPILOG,
        formatter_class=raw,
    )
    p.add_argument("file", metavar="FILE", help="campaign YAML file")
    p.add_argument(
        "--results",
        default="results",
        metavar="DIR",
        help="results root; the campaign writes DIR/<campaign name>/ (default: results)",
    )
    p.add_argument("--force", action="store_true", help="rerun runs that are already complete")
    p.add_argument(
        "--redo-rig-limited",
        action="store_true",
        help="rerun complete runs marked rig-limited (the rig's CPU, not MPTCP, set their "
        "pace: `mprig status` and the report name them), keeping every other run; with "
        "--skip-archived also the archive's rig-limited runs (`mprig archive` swaps the "
        "clean rerun in)",
    )
    p.add_argument(
        "--vm",
        dest="vm",
        action="store_true",
        default=None,
        help="run the virtual rig inside a VM even if this kernel has sch_netem",
    )
    p.add_argument("--no-vm", dest="vm", action="store_false", help="never use a VM")
    p.add_argument(
        "--kvm",
        dest="kvm",
        action="store_true",
        default=None,
        help="VM mode: boot with KVM, no fallback (default: KVM where a guest has been "
        "seen to boot with it, see `mprig doctor`; MPRIG_KVM=1/0 does the same)",
    )
    p.add_argument(
        "--no-kvm", dest="kvm", action="store_false", help="VM mode: software emulation only"
    )
    p.add_argument(
        "--kernel",
        default=None,
        metavar="PATH",
        help="VM mode: boot this kernel image (e.g. `make kernel-vm`'s bzImage) instead of "
        "/boot's newest; MPRIG_VM_KERNEL=PATH does the same. run.json's hosts.*.kernel "
        "records the release the guest ran",
    )
    p.add_argument(
        "--rig",
        default=DEFAULT_RIG,
        metavar="NAME",
        help=f"virtual rig name (namespaces mprig-NAME-*; default {DEFAULT_RIG})",
    )
    p.add_argument(
        "--inventory",
        default=None,
        metavar="PATH",
        help="run on this lab inventory instead of the campaign's rig.inventory (which must"
        " lie under inventory/); may lie anywhere",
    )
    p.add_argument(
        "--shard",
        type=parse_shard,
        default=None,
        metavar="I/N",
        help="run only shard I of N (1-based): every rig computes the same balanced"
        " partition of the plan (each variant and each cell spread over the shards); join"
        " the shards' results with `mprig merge`",
    )
    p.add_argument(
        "--skip-archived",
        default=None,
        metavar="ARCHIVE",
        help="leave out the planned runs (of the shard, with --shard) that ARCHIVE, an `mprig"
        " archive` of this campaign, spec and plan, holds complete: a full profile resumes on a"
        " fresh machine from its committed runs (`make paper-shard` passes it)",
    )
    p.add_argument(
        "--stop-after",
        type=parse_duration,
        default=None,
        metavar="DURATION",
        help="start no run expected to end after DURATION (90m, 2h, 1h30m, 5400s) from now;"
        " the run in progress finishes, exit status 3 says runs are left, and the next `mprig"
        " run` resumes with them (a session's or a night's share of a long campaign)",
    )
    p.add_argument(
        "--no-preflight",
        dest="preflight",
        action="store_false",
        help="lab rig: skip the MPTCP preflight. By default every path is probed before the"
        " first run (MP_CAPABLE handshake, ISN, a data transfer with DSS mappings both ways,"
        " as `mprig probe`) and the campaign refuses to start when a path fails, naming it;"
        " the per-path results go to RESULTS/preflight.json. The virtual rig is not probed:"
        " its paths are veths mprig builds, with no middlebox on them",
    )
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--log-json", action="store_true", help="JSON event lines on stderr (CI)")
    p.add_argument("--outer-lock", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


# -- run ----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    import time

    from mprig.campaign import shard
    from mprig.errors import UsageError, escape
    from mprig.rig import vmprobe
    from mprig.run import bundle, judge

    args.started = time.monotonic()  # --stop-after counts from here
    startup.begin()  # events.jsonl's startup_s: where the campaign's start goes
    campaign, plan = judge.plan_file(args.file)  # the checks `mprig validate` makes
    startup.mark("plan")
    for line in campaign.deprecations:  # old spellings, accepted (spec_spelling.py)
        print(f"mprig: warning: {line}", file=sys.stderr)
    part = getattr(args, "shard", None)
    runs = shard.select(plan, part)
    held = _archived(args, campaign, plan, runs)  # --skip-archived: in the archive already
    runs = [r for r in runs if r.run_id not in held]
    startup.mark("archive check")
    if held and not runs:
        return 0
    results = Path(args.results).resolve() / campaign.name
    if (results / bundle.KEPT_MANIFEST).exists():
        raise UsageError(
            f"{escape(str(results))} is an archive (`mprig archive`: run.json without captures);"
            " run into another results directory (--results DIR), then archive into it"
        )
    results.mkdir(parents=True, exist_ok=True)
    if getattr(args, "inventory", None):  # given on the command line: may lie anywhere
        campaign = campaign.model_copy(update={"rig": campaign.rig.model_copy(
            update={"inventory": args.inventory})})  # fmt: skip
    lab = campaign.rig.inventory != "virtual"
    requested = {True: "vm", False: "native", None: campaign.rig.mode}[args.vm]
    if getattr(args, "kvm", None) is not None:
        os.environ["MPRIG_KVM"] = "1" if args.kvm else "0"
    if getattr(args, "kernel", None):  # checked now; vmprobe.find_kernel boots it
        os.environ[vmprobe.VM_KERNEL_ENV] = str(vmprobe.chosen_kernel(args.kernel))
    hwsim = campaign.rig.wifi == "hwsim"
    mode, why = ("native", "lab inventory") if lab else vmprobe.choose_mode(requested, hwsim=hwsim)
    if not args.quiet and not args.log_json:
        count = f"shard {part}: {len(runs)} of {len(plan)}" if part else str(len(runs))
        print(f"mprig: {campaign.name}: {count} runs, rig mode {mode} ({why})", file=sys.stderr)
    with _campaign_lock(results, args):
        write_campaign_json(results, args.file, campaign, plan, shard=(part, runs), held=held)
        _say_unplanned(results, {r.run_id for r in plan}, args)
        startup.mark("campaign.json")
        if mode == "vm":
            code = _run_in_vm(args, results, vm_deadline(runs), campaign)
        else:
            code = _run_native(args, campaign, runs, results, lab)
    if not args.outer_lock:
        print_summary(results, runs)
    return code


def _say_unplanned(results: Path, planned: set[str], args: argparse.Namespace) -> None:
    """Name the bundles in RESULTS whose run the plan does not name (runs of an earlier spec
    or plan): reports and archives leave them out (status unplanned), so say it up front."""
    from mprig.run.bundle import RUN_JSON

    if args.quiet or args.log_json or args.outer_lock:  # the outer `mprig run` says it
        return
    stale = sorted(
        p.name for p in results.iterdir()
        if p.is_dir() and not p.name.startswith(".") and (p / RUN_JSON).is_file()
        and p.name not in planned
    )  # fmt: skip
    if stale:
        print(f"mprig: {results}: {len(stale)} run bundle(s) not in this campaign's plan (runs "
              f"of another spec or plan, e.g. {stale[0]}): reports and archives leave them "
              "out; move them out of this directory", file=sys.stderr)  # fmt: skip


@contextlib.contextmanager
def _campaign_lock(results: Path, args: argparse.Namespace) -> Iterator[None]:
    from mprig.run.runner import exclusive

    if args.outer_lock:  # the `mprig run` outside the VM holds it
        yield
        return
    say = None if args.quiet else (lambda text: print(f"mprig: {text}", file=sys.stderr))
    with exclusive(results / "campaign.lock", f"campaign {results.name}", say):
        yield


# Seconds a run may take beyond its traffic under software emulation (rig set-up per run,
# captures, fetches, retries' waits), and the campaign's fixed costs (rig up and down).
RUN_ALLOWANCE_S = 60.0
CAMPAIGN_ALLOWANCE_S = 900.0


def vm_deadline(runs: list[Any]) -> float:
    """How long the campaign VM may run once booted: every run with its retries at twice
    (traffic + allowance), plus the rig's fixed costs. A hung guest is caught sooner by
    its heartbeats (mprig.rig.vmboot)."""
    from mprig.run.run_attempt import RETRIES

    per_try = float(sum(r.traffic.duration_s + RUN_ALLOWANCE_S for r in runs))
    return CAMPAIGN_ALLOWANCE_S + 2 * per_try * (1 + RETRIES)


def _run_in_vm(args: argparse.Namespace, results: Path, deadline: float, campaign: Any) -> int:
    """Re-execute this command inside one VM (`--no-vm` there); the results are shared."""
    import signal

    from mprig.rig import vm, vmshares
    from mprig.stack import knobs, vmbpf

    argv = [sys.executable, "-m", "mprig.cli", "run", str(Path(args.file).resolve())]
    argv += ["--results", str(results.parent), "--no-vm", "--rig", args.rig, "--outer-lock"]
    flags = (
        ("--force", args.force),
        ("--redo-rig-limited", args.redo_rig_limited),
        ("--quiet", args.quiet),
        ("--log-json", args.log_json),
    )
    argv += [flag for flag, on in flags if on]
    if getattr(args, "shard", None) is not None:
        argv += ["--shard", str(args.shard)]
    if getattr(args, "skip_archived", None):  # the guest sees the host's files read-only
        argv += ["--skip-archived", str(Path(args.skip_archived).resolve())]
    if getattr(args, "stop_after", None):  # counted inside from the guest's boot
        argv += ["--stop-after", f"{max(args.stop_after - budget_spent(args), 0.001):.3f}s"]
    got: list[int] = []

    def on_term(signum: int, _frame: Any) -> None:
        got.append(signum)
        raise KeyboardInterrupt  # run_in_vm stops the VM on it

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        from mprig.run.headroom import HOST_CPU_FILE, HostCpuWriter

        inputs = [Path(args.file).resolve(), *campaign.input_files()]  # /var/tmp: not in VM
        shared = [results, *vmshares.shares_for(inputs, [getattr(args, "skip_archived", None)])]
        vmbpf.for_vm(knobs.congestion_controls(campaign.variants))  # before the boot
        with HostCpuWriter(results / HOST_CPU_FILE) as cpu:  # the runner inside reads it
            return vm.run_in_vm(
                argv, shared, timeout=deadline, on_start=lambda p: setattr(cpu, "pgid", p.pid)
            )
    except KeyboardInterrupt:
        print(
            "mprig: interrupted; the VM was stopped (the run in progress is redone next time)",
            file=sys.stderr,
        )
        return 128 + (got[0] if got else signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, old)


def _run_native(
    args: argparse.Namespace, campaign: Any, runs: list[Any], results: Path, lab: bool
) -> int:
    from mprig.rig import inventory, virtual
    from mprig.run import runner
    from mprig.run.progress import Reporter
    from mprig.run.run_signals import signals_held
    from mprig.stack import cc_allowed, knobs

    reporter = Reporter(results, quiet=args.quiet, log_json=args.log_json)

    def run_on(rig: Any) -> runner.CampaignResult:
        return runner.run_campaign(
            campaign, runs, rig, results, reporter,
            force=args.force, redo_rig_limited=args.redo_rig_limited, budget=budget(args),
        )  # fmt: skip

    try:
        if lab:
            from mprig.cli.run_lab import preflight, read_teardown, verify_teardown
            from mprig.stack import lab_cc

            explicit = bool(getattr(args, "inventory", None))
            where = Path(campaign.rig.inventory)
            data = inventory.load_inventory(where, explicit=explicit)
            rig = inventory.rig_from_inventory(where, data, explicit=explicit)
            with runner.exclusive(_rig_lock_path(rig.name), f"rig {rig.name}", reporter.message):
                lab_cc.check(rig, campaign.variants, Path(campaign.rig.inventory))
                if getattr(args, "preflight", True):
                    preflight(rig, results, reporter.message, inventory.host_python(data))
                before = read_teardown(rig, campaign.variants)
                outcome = run_on(rig)
                verify_teardown(rig, campaign.variants, before, results)
        else:
            with (
                runner.exclusive(_rig_lock_path(args.rig), f"rig {args.rig}", reporter.message),
                cc_allowed.allow(knobs.congestion_controls(campaign.variants), reporter.message),
            ):
                startup.mark("congestion controls")  # BPF ones built and registered
                rig = _virtual_up(args.rig, campaign, reporter.message)
                startup.mark("rig up")
                try:
                    outcome = run_on(rig)
                finally:
                    with signals_held() as late:
                        virtual.down(args.rig)
                if late and outcome.interrupted is None:
                    return 128 + late[0]
    finally:
        reporter.close()
    if outcome.interrupted is not None:
        return 128 + outcome.interrupted
    if outcome.left and not outcome.failed:
        return 3
    return 0 if outcome.complete == len(runs) else 1


def budget_spent(args: argparse.Namespace) -> float:
    """Seconds of --stop-after's budget spent since this `mprig run` started."""
    import time

    return time.monotonic() - float(args.started)


def budget(args: argparse.Namespace) -> Any:
    """The --stop-after budget: from this command's start, or inside the campaign VM from
    the guest's boot (the outer `mprig run` sent what was left when it started the VM)."""
    from mprig.run import stop_after

    if not getattr(args, "stop_after", None):
        return None
    start = stop_after.since_boot() if args.outer_lock else args.started
    return stop_after.Budget(args.stop_after, start=start)


def _virtual_up(name: str, campaign: Any, say: Any) -> Any:
    """The virtual rig for the campaign: veth links, or a real 802.11 first Wi-Fi hop
    (hwsim.up converges playbooks/site.yml, so hostapd and wpa_supplicant come from the
    lab's roles, and waits until the station is associated)."""
    from mprig.rig import virtual, vmprobe

    if campaign.rig.wifi == "hwsim":
        from mprig.rig import hwsim

        say(
            "rig: the Wi-Fi hop is 802.11 over mac80211_hwsim; converging playbooks/site.yml "
            "(hostapd, wpa_supplicant): minutes under software emulation"
        )
        return hwsim.up(name, campaign.paths)
    # Inside the VM, Ansible would take minutes under emulation for state the runner sets
    # on every run anyway (sysctls, MPTCP limits and endpoints).
    return virtual.up(name, campaign.paths, provision_hosts=not vmprobe.in_vm())


def _rig_lock_path(name: str) -> Path:
    """The campaign-on-rig lock (separate from the rig's own up/down lock)."""
    return Path(os.environ.get("MPRIG_STATE", "/run/mprig")) / f"{name}.campaign.lock"


def _archived(
    args: argparse.Namespace, campaign: Any, plan: list[Any], runs: list[Any]
) -> list[str]:
    """With --skip-archived ARCHIVE: the run ids of RUNS that ARCHIVE holds complete, said on
    stderr (UsageError unless ARCHIVE is an archive of this campaign, spec and plan)."""
    from mprig.run import bundle, merge

    if not getattr(args, "skip_archived", None):
        return []
    doc = bundle.campaign_doc(args.file, campaign, plan)
    part = f" of shard {args.shard}" if getattr(args, "shard", None) else ""
    ids, redo = [r.run_id for r in runs], bool(args.redo_rig_limited)
    mine, say = merge.held_runs(Path(args.skip_archived), doc, ids, part, redo)
    if mine and not (args.log_json or args.outer_lock):  # said once, outside the VM
        print(f"mprig: {campaign.name}: {say}", file=sys.stderr)
    return mine


def write_campaign_json(
    results: Path,
    file: str,
    campaign: Any,
    runs: list[Any],
    shard: tuple[Any, list[Any]] = (None, []),
    held: list[str] | None = None,
) -> None:
    """campaign.json: the spec as parsed, the whole plan (run id, index, parameters) and,
    for `--shard I/N`, the shard and its run ids; with --skip-archived, the runs left out
    because the archive holds them (`archived_elsewhere`)."""
    from mprig.run import bundle

    doc = bundle.campaign_doc(file, campaign, runs)
    if held:
        doc["archived_elsewhere"] = list(held)
    part, mine = shard
    if part is not None:
        doc["shard"] = {
            "index": part.index,
            "count": part.count,
            "run_ids": [r.run_id for r in mine],
        }
    bundle.write_json(results / bundle.CAMPAIGN_JSON, doc)
