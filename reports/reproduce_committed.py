"""A committed reproduction judged again from its own files: report.md and verdicts.json
rewritten from metrics.parquet and environment.json, without the results/ the runs wrote.

A fix to the verdicts (reports/references.py) or to report.md then reaches
reports/reproductions/<paper>/ without running the campaigns again. Judging goes through
the code `mprig reproduce` uses on results (references.load_for, reproduce.render); this
module only rebuilds the `Results` each campaign's checks read:

- the runs: the campaign's rows of metrics.parquet (runs.parquet as `mprig collect` wrote
  it, with the statuses reports.results gave them);
- the spec: the campaign file as it is now, expanded (mprig.campaign.plan) into each run's variant
  and paths, matched to the committed runs by the readable part of the run id (variant,
  sweep point, repetition). The id's hash is not compared: it covers every field of the
  spec's models as dumped, so a field added to them since the runs changes it although
  the campaign file did not (the case of every reproduction committed in 2026-11). A run
  the file no longer plans is refused;
- the planned runs it does not hold, from the results directory's campaign.json where
  there is one (a full profile judged at n >= 5 of its 30 repetitions from an archive: its
  report.md counts the runs "not archived yet");
- each run's attempts (metrics' `attempts` column), which report.md counts per point, and
  why its discarded attempts ended (`retry_reasons`), which report.md quotes;
- the hosts' facts the checks read from run.json: the kernel of each run (metrics' `kernel`
  column; where it has none, every kernel of environment.json) and
  the congestion controls every host of the campaign offered (environment.json
  `campaigns.<name>.congestion_controls`). A reproduction written before environment.json
  recorded them is upgraded once: the paper's common ones (report.md's "Kernel offers"
  line) and the congestion control of every variant that completed a run here, which the
  kernel therefore offered (BPF ones are loaded for the campaigns that use them).
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig.errors import UsageError
from mprig.stack.knobs import AVAILABLE_CC
from reports.paperplans import PAPERS, campaign_file
from reports.reproduce import CampaignOutcome, write_judgement
from reports.reproduce_html import Committed, campaign_runs, paper_of, read
from reports.results import Results

if TYPE_CHECKING:
    import pandas as pd

KERNEL_OFFERS = re.compile(r"^Kernel offers: (.*)\.$", re.M)  # report.md's cc_lines


def congestion_controls(root: Path, env: dict[str, Any]) -> tuple[str, ...] | None:
    """The congestion controls every host offered: environment.json's, else (written before
    environment.json recorded them) the line report.md printed from the runs' run.json."""
    if "congestion_controls" in env:
        cc = env["congestion_controls"]
        return None if cc is None else tuple(cc)
    md = root / "report.md"
    found = KERNEL_OFFERS.search(md.read_text()) if md.is_file() else None
    return tuple(found.group(1).split()) if found else None


def planned_runs(stem: str, profile: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The campaign file's spec as campaign.json records it, and per run id the run.json
    fields the checks read (variant, paths, point), by readable run id."""
    from mprig.campaign.plan import expand, run_json
    from mprig.campaign.spec import load_campaign

    campaign = load_campaign(campaign_file(stem, profile))
    plan = {readable(run.run_id): run_json(run) for run in expand(campaign)}
    return campaign.model_dump(mode="json"), plan


def readable(run_id: str) -> str:
    """`mptcp-p2.delay_ms_10-r1-7b3be79b` -> `mptcp-p2.delay_ms_10-r1`: without the hash."""
    return run_id.rsplit("-", 1)[0]


def _algorithm(cc: str) -> str:
    """A variant's cc (a preset name or an algorithm) as the kernel names it."""
    from mprig.campaign.presets import CC_PRESETS

    preset = CC_PRESETS.get(cc)
    return preset.algorithm or cc if preset else cc


def _hosts(kernels: list[str], cc: tuple[str, ...] | None) -> dict[str, Any]:
    sysctls = {} if cc is None else {AVAILABLE_CC: " ".join(cc)}
    return {f"host{i}": {"kernel": k, "sysctls": sysctls} for i, k in enumerate(kernels)}


def _by_run(runs: pd.DataFrame, column: str) -> dict[str, Any]:
    """Metrics' COLUMN by run id; empty where the committed metrics predate it."""
    if column not in runs:
        return {}
    return dict(zip(runs["run_id"].map(str), runs[column], strict=True))


def campaign_results(
    name: str, stem: str, profile: str, metrics: pd.DataFrame, env: dict[str, Any],
    cc: tuple[str, ...] | None, results_root: Path, gaps: bool = False,
) -> Results:  # fmt: skip
    """One campaign's Results rebuilt from committed files (see the module's docstring)."""
    runs = campaign_runs(metrics, name)
    spec, plan = planned_runs(stem, profile)
    unplanned = sorted(r for r in map(str, runs["run_id"]) if readable(r) not in plan)
    if unplanned:
        raise UsageError(
            f"{campaign_file(stem, profile)}: plans no run like {unplanned[0]} of "
            f"metrics.parquet ({len(unplanned)} such runs): the campaign changed since the "
            "runs, so their configuration cannot be rebuilt; run them again"
        )
    bundles = {str(r): {**plan[readable(str(r))], "run_id": str(r)} for r in runs["run_id"]}
    recorded = (env.get("campaigns") or {}).get(name) or {}
    if "congestion_controls" in recorded:
        offered = recorded["congestion_controls"]
        cc = None if offered is None else tuple(offered)
    elif cc is not None:
        done = runs["run_id"][runs["status"] == "complete"].map(str)
        ran = [_algorithm(str(bundles[r]["variant"].get("cc"))) for r in done]
        cc = tuple(dict.fromkeys([*cc, *ran]))
        recorded["congestion_controls"] = list(cc)  # the upgrade rejudge() writes back
    everyone = _hosts(env.get("kernels") or [], cc)
    each = _by_run(runs, "kernel")  # the kernel each run ran on
    tries = _by_run(runs, "attempts")  # for report.md's retry line
    why = _by_run(runs, "retry_reasons")  # the JSON list, for the same line
    for run_id, bundle in bundles.items():
        if run_id in tries:
            bundle["attempts"] = int(tries[run_id])
        if isinstance(reasons := why.get(run_id), str) and reasons:
            bundle["earlier_attempts"] = [{"reason": r} for r in json.loads(reasons)]
        kernel = each.get(run_id)
        known = isinstance(kernel, str) and kernel != ""
        bundle["hosts"] = _hosts(str(kernel).split(", "), cc) if known else everyone
    planned = tuple(
        {"run_id": r, "variant": b["variant"]["name"], "repetition": b["repetition"],
         "point": b["point"]}
        for r, b in bundles.items()
    )  # fmt: skip
    unrun = _unrun(results_root / name, bundles) if gaps else []
    return Results(results_root / name, name, spec, (*planned, *unrun), runs, bundles)


def _unrun(directory: Path, held: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs DIRECTORY's campaign.json plans and metrics.parquet lacks, for a campaign
    whose report.md counted such runs: a full profile judged at n >= 5 of its 30 repetitions
    from an archive lists them as report.md did ("300 of 360 planned runs not archived
    yet"). None when the directory has no campaign.json."""
    from reports.results import _planned_runs

    try:
        campaign = json.loads((directory / "campaign.json").read_text())
    except (OSError, ValueError):
        return []
    have = {readable(r) for r in held}
    return [p for p in _planned_runs(campaign) if readable(p["run_id"]) not in have]


def _had_gaps(env: dict[str, Any], name: str) -> bool:
    """Whether the committed environment.json's `incomplete` says campaign NAME lacked
    planned runs ("000-table1-full: 300 of 360 planned runs not archived yet ..."): only
    then are they read back, so a results/ directory left on this machine cannot change a
    complete report."""
    return any(
        str(entry).startswith(f"{name}: ") and " planned runs " in str(entry)
        for entry in env.get("incomplete") or []
    )


def outcomes(committed: Committed, results_root: Path = Path("results")) -> list[CampaignOutcome]:
    """The committed reproduction's campaigns as `mprig reproduce` saw them, their checks
    judged again (its environment upgraded in place where it lacks congestion controls)."""
    from reports import references

    paper, profile = paper_of(committed), str(committed.verdicts.get("profile", ""))
    env, metrics = committed.environment, committed.metrics
    cc = congestion_controls(committed.root, env)
    out = []
    for stem in PAPERS[paper].campaigns:
        name = f"{stem}-{profile}"
        if not campaign_file(stem, profile).is_file():
            why = f"no {campaign_file(stem, profile).name}; `--profile full` runs it"
            out.append(CampaignOutcome(stem, profile, None, [], why))
        elif "campaign" not in metrics or not (metrics["campaign"] == name).any():
            why = f"{results_root / name} does not exist"
            out.append(CampaignOutcome(stem, profile, None, [], why))
        else:
            gaps = _had_gaps(env, name)
            results = campaign_results(name, stem, profile, metrics, env, cc, results_root, gaps)
            out.append(CampaignOutcome(stem, profile, results, references.load_for(results)))
    return out


def rejudge(root: Path, results_root: Path | None = None) -> Path:
    """ROOT/verdicts.json and report.md (and its figures) written again from ROOT's
    committed files (read once); environment.json gains the congestion controls when it
    lacked them, and names its paper "paper" where it said "seed" (read() upgrades it).
    RESULTS_ROOT: where the reproduction read its runs (default: the directory its report.md
    names, results/ or reports/archived-runs; results/ when it names none). Returns
    ROOT/report.md."""
    from mprig import fsio

    committed = read(root)
    if results_root is None:
        results_root = _results_root(root / "report.md")
    paper = paper_of(committed)
    env = committed.environment
    cc = congestion_controls(root, env)
    found = outcomes(committed, results_root)
    env.setdefault("congestion_controls", None if cc is None else list(cc))
    text = json.dumps(env, indent=1, sort_keys=True) + "\n"
    if text != (root / "environment.json").read_text():
        fsio.write_text(root / "environment.json", text)
    return write_judgement(PAPERS[paper], found, cc, root)


def _results_root(report: Path) -> Path:
    """The directory a committed report.md says its runs came from ("N of N runs complete
    (reports/archived-runs/004-fig4-full)." or, n >= 5 of a full profile's repetitions, "60
    of 360 runs complete; 300 planned runs not archived yet (reports/archived-runs/...)."),
    or results/."""
    with contextlib.suppress(OSError):
        found = re.search(r"runs complete[^(\n]*\(([^()\n]+)/[^/()\n]+\)", report.read_text())
        if found:
            return Path(found.group(1))
    return Path("results")
