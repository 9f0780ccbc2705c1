"""`mprig reproduce`: one paper at a time, run its campaigns (experiments/papers/) and write a
reproduction report: our numbers beside the paper's with the verdicts of
reports/references, the derived comparisons the papers make (MPTCP's gain over TCP per
sweep point), and the setup differences between the paper and this rig.

The builders are pure (results in, Markdown lines out); `reproduce` is the I/O edge and
reports/cmd_reproduce.py the command; the papers' plans are reports/paperplans.py, the
docs/papers.md section reports/reproduce_docs.py. Running and collecting go through the
`mprig run` and `mprig collect` commands, so this module depends on their command lines only.
"""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig.errors import UsageError
from reports import reproduce_gaps
from reports.paperplans import (
    COMMITTED,
    PAPERS,
    PAPERS_DIR,
    Comparison,
    PaperPlan,
    campaign_file,
)
from reports.reproduce_delay import delay_lines
from reports.reproduce_rig import (
    cc_lines,
    kernel_counts,
    kernel_lines,
    preset_lines,
    reasons_cell,
    retry_lines,
    run_attempts,
    run_kernel,
    wifi_model_lines,
)
from reports.results import fmt_value
from reports.tables import markdown_table, sig

if TYPE_CHECKING:
    import pandas as pd

    from reports.references import Check
    from reports.results import Results

# --- pure builders -----------------------------------------------------------------------


def _axis_column(results: Results, axis: str) -> str | None:
    from reports.results import short_axis

    for column in results.axes:
        if short_axis(column) == axis:
            return column
    return None


def comparison_rows(results: Results, comp: Comparison) -> list[dict[str, str]]:
    """Per axis value: every variant's mean throughput (Mbit/s, see `throughput_bps`) and its
    gain over the baseline (%, a ratio of means, as reports.references computes a gain);
    runs that did not complete are left out."""
    column = _axis_column(results, comp.axis)
    done = results.complete.copy()
    if comp.variants:
        done = done[done["variant"].isin(comp.variants)]
    if column is None or done.empty:
        return []
    done["_mbit"] = throughput_bps(done) / 1e6
    means = done.groupby([column, "variant"])["_mbit"].mean()
    rows = []
    for value in sorted(done[column].dropna().unique()):
        row = {comp.axis: fmt_value(value)}
        base = means.get((value, comp.baseline), math.nan)
        for variant in results.in_variant_order(done["variant"]):
            mbit = means.get((value, variant), math.nan)
            row[f"{variant} Mbit/s"] = fmt_number(mbit)
            if variant != comp.baseline:
                row[f"{variant} gain %"] = fmt_number(100 * (mbit / base - 1) if base else math.nan)
        rows.append(row)
    return rows


def throughput_bps(runs: pd.DataFrame) -> pd.Series:
    """Per run: the metric the references judge, so a table cell and a verdict row print one
    number: the capture's aggregate throughput (`throughput_bps`), else the sum of the
    per-path throughputs (plain TCP runs), else iperf3's receiver rate."""
    import pandas as pd

    per_path = [c for c in runs.columns if c.startswith("throughput_bps.")]
    nan = pd.Series(float("nan"), index=runs.index)
    out = runs["throughput_bps"] if "throughput_bps" in runs.columns else nan
    out = out.fillna(runs[per_path].sum(axis=1, min_count=1) if per_path else nan)
    return out.fillna(runs["iperf3_bps"] if "iperf3_bps" in runs.columns else nan)


def fmt_number(value: Any) -> str:
    """A measured number as every view prints it (reports.tables.sig); others as they are."""
    return sig(value) if isinstance(value, float) else str(value)


def finding_lines(rows: list[dict[str, str]], comp: Comparison) -> list[str]:
    """One sentence per sweep point and variant: above or below the baseline, by how much."""
    out = []
    base_key = f"{comp.baseline} Mbit/s"
    for row in rows:
        for key, value in row.items():
            if not key.endswith(" gain %") or row.get(base_key, "–") == "–" or value == "–":
                continue
            variant = key.removesuffix(" gain %")
            side = "below" if value.startswith("-") else "not below"
            out.append(
                f"- {comp.axis} = {row[comp.axis]}: {variant} {row[f'{variant} Mbit/s']} Mbit/s "
                f"against {row[base_key]} Mbit/s for {comp.baseline}: {side} it ({value} %)"
            )
    return out


def check_lines(checks: list[Check]) -> list[str]:
    """The references verdict table: ours beside the paper's, ours printed as the
    comparison tables print it (`fmt_number`), so one number reads the same everywhere."""
    from reports.report import check_rows

    keep = ("id", "source", "paper_value", "bound", "ours", "ci", "window", "unit", "n",
            "n_needed", "verdict", "reason")  # fmt: skip
    rows = []
    for c, row in zip(checks, check_rows(checks), strict=True):
        row["ours"] = "–" if c.ours is None else fmt_number(c.ours)
        rows.append({k: row[k] for k in keep})
    return markdown_table(rows)


def available_cc(results: list[Results]) -> tuple[str, ...] | None:
    """Congestion controls every recorded host offers, from run.json host facts."""
    common: set[str] | None = None
    order: list[str] = []
    for r in results:
        for bundle in r.bundles.values():
            for host in (bundle.get("hosts") or {}).values():
                text = (host.get("sysctls") or {}).get("net.ipv4.tcp_available_congestion_control")
                if text:
                    names = str(text).split()
                    order += [n for n in names if n not in order]
                    common = set(names) if common is None else common & set(names)
    return None if common is None else tuple(n for n in order if n in common)


@dataclass(frozen=True)
class CampaignOutcome:
    """One campaign of a paper: its results and reference checks, or why there are none."""

    stem: str
    profile: str
    results: Results | None
    checks: list[Check]
    missing: str = ""  # why there are no results


def render(plan: PaperPlan, outcomes: list[CampaignOutcome], cc: tuple[str, ...] | None) -> str:
    """The reproduction report of one paper, as Markdown."""
    from reports import orderings

    lines = [f"# Reproduction of paper {plan.paper}: {plan.title}", ""]
    lines += reproduce_gaps.lines(reproduce_gaps.gaps(outcomes, PAPERS_DIR))
    for o in outcomes:
        lines += _campaign_section(plan, o)
    lines += orderings.lines(
        orderings.judge_all(plan.paper, [c for o in outcomes for c in o.checks])
    )
    lines += ["## Setup differences", "", *[f"- {d}" for d in plan.differences], ""]
    offered = {
        f"{o.stem}-{o.profile}": available_cc([o.results])
        for o in outcomes
        if o.results is not None
    }
    lines += ["### Congestion control on this rig", "", *cc_lines(cc, offered), ""]
    if plan.wifi:
        lines += ["### Reordering presets", "", *preset_lines(), ""]
        lines += ["### Wi-Fi model applied per distance (mprig/campaign/wifi.py)", ""]
        lines += [*wifi_model_lines(), ""]
    return "\n".join(lines) + "\n"


def _campaign_section(plan: PaperPlan, o: CampaignOutcome) -> list[str]:
    name = f"{o.stem}-{o.profile}"
    lines = [f"## {name}", ""]
    if o.results is None:
        cmd = f"mprig reproduce {plan.paper} --profile {o.profile} --run"
        if not campaign_file(o.stem, o.profile).is_file():
            return [*lines, f"Not part of the {o.profile} profile: {o.missing}.", ""]
        return [*lines, f"No results: {o.missing}. Run `{cmd}`.", ""]
    r = o.results
    never = f"; {len(r.missing)} planned runs {reproduce_gaps.unrun(r)}" if r.missing else ""
    planned = max(len(r.runs), len(r.planned))
    lines += [f"{len(r.complete)} of {planned} runs complete{never} ({r.root}).", ""]
    lines += kernel_lines(kernel_counts(r)) + retry_lines(r)
    for comp in (c for c in plan.comparisons if c.campaign == o.stem):
        rows = comparison_rows(r, comp)
        lines += (
            [f"### {comp.title}", "", comp.claim, ""] if comp.claim else [f"### {comp.title}", ""]
        )
        lines += [*(markdown_table(rows) or ["(no complete runs)"]), ""]
        lines += [*finding_lines(rows, comp), ""] if rows else []
    lines += delay_lines(r)
    if o.checks:
        lines += ["### Against the paper (reports/references)", "", *check_lines(o.checks), ""]
    return lines


# --- I/O edge ----------------------------------------------------------------------------


def load_outcome(stem: str, profile: str, results_root: Path) -> CampaignOutcome:
    """Read a campaign's results and check its references; missing results are reported."""
    from reports import references
    from reports.results import load

    root = results_root / f"{stem}-{profile}"
    if not campaign_file(stem, profile).is_file():
        why = f"no {campaign_file(stem, profile).name}; `--profile full` runs it"
        return CampaignOutcome(stem, profile, None, [], why)
    if not (root / "campaign.json").is_file():
        return CampaignOutcome(stem, profile, None, [], f"{root} does not exist")
    try:
        results = load(root)
    except UsageError as e:
        return CampaignOutcome(stem, profile, None, [], str(e))
    return CampaignOutcome(stem, profile, results, references.load_for(results))


LOCAL_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


def _local_cc() -> tuple[str, ...] | None:
    """This machine's congestion controls, when no run recorded the rig's."""
    from mprig.campaign import presets

    try:
        return presets.parse_available_cc(LOCAL_CC.read_text())
    except OSError:
        return None


def _mprig(*args: str) -> int:
    """Run an mprig command in a child process (its own errors print there)."""
    return subprocess.run([sys.executable, "-m", "mprig.cli", *args], check=False).returncode


def run_campaigns(plan: PaperPlan, profile: str, results_root: Path) -> None:
    """`mprig run` then `mprig collect` each campaign of the paper; bad input stops."""
    for stem in plan.campaigns:
        if not campaign_file(stem, profile).is_file():
            continue  # not part of this profile (the report says so)
        status = _mprig("run", str(campaign_file(stem, profile)), "--results", str(results_root))
        if status == 2:
            raise UsageError(f"mprig run {campaign_file(stem, profile)} rejected its input")
        _mprig("collect", str(results_root / f"{stem}-{profile}"))


def verdict_summary(paper: str, outcomes: list[CampaignOutcome]) -> dict[str, Any]:
    """Verdict counts, in all and per campaign, and one record per reference checked."""
    from reports import orderings
    from reports.report import verdict_counts

    checks = [c for o in outcomes for c in o.checks]
    return {
        "counts": verdict_counts(checks),
        "orderings": orderings.as_json(orderings.judge_all(paper, checks)),
        "campaigns": {f"{o.stem}-{o.profile}": verdict_counts(o.checks) for o in outcomes},
        "checks": [
            {
                "id": c.id,
                "campaign": f"{o.stem}-{o.profile}",
                "verdict": c.verdict,
                "paper": c.entry.ref.value if c.entry else None,
                "ours": c.ours,
                "low": _json_number(c.low),
                "high": _json_number(c.high),
                "window": [_json_number(x) for x in c.window] if c.window else None,
                "n": c.n,
                "n_base": c.n_base,
                "n_needed": c.n_needed,
                "reason": c.reason,
            }
            for o in outcomes
            for c in o.checks
        ],
    }


def _json_number(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else x


def environment(outcomes: list[CampaignOutcome]) -> dict[str, Any]:
    """What the runs ran on, read from their run.json: kernels, tool versions, rig mode,
    whether the VM had KVM or software emulation ("unrecorded" where run.json says not) and
    the congestion controls every host offered (None: unrecorded), which
    reports/reproduce_committed.py needs to judge a committed reproduction again."""
    seen: dict[str, set[str]] = {"kernels": set(), "rig_modes": set(), "acceleration": set()}
    tools: dict[str, set[str]] = {}
    runs: dict[str, dict[str, Any]] = {}
    for o in outcomes:
        if o.results is None:
            continue
        r = o.results
        offered = available_cc([r])  # per campaign: BPF ones are loaded for its variants
        runs[f"{o.stem}-{o.profile}"] = {
            "runs": len(r.runs),
            "complete": len(r.complete),
            "congestion_controls": None if offered is None else list(offered),
            "kernels": kernel_counts(r),  # complete runs per kernel
        }
        for bundle in r.bundles.values():
            seen["rig_modes"].add(str(bundle.get("rig_mode", "unrecorded")))
            vm = bundle.get("vm") if isinstance(bundle.get("vm"), dict) else {}
            accel = bundle.get("acceleration") or (vm or {}).get("accel") or "unrecorded"
            seen["acceleration"].add(str(accel))
            for host in (bundle.get("hosts") or {}).values():
                seen["kernels"].add(str(host.get("kernel", "unrecorded")))
                for tool, version in (host.get("tools") or {}).items():
                    tools.setdefault(str(tool), set()).add(str(version))
    cc = available_cc([o.results for o in outcomes if o.results is not None])
    return {
        **{k: sorted(v) for k, v in seen.items()},
        "tools": {k: sorted(v) for k, v in sorted(tools.items())},
        "campaigns": runs,
        "congestion_controls": None if cc is None else list(cc),  # what every host offered
    }


def metrics_frame(outcomes: list[CampaignOutcome]) -> pd.DataFrame:
    """Every run of the paper's campaigns, one row each, with its campaign's name, the
    kernel it ran on (reproduce_rig.run_kernel), its attempts (run_attempts) and why the
    discarded ones ended (reasons_cell)."""
    import pandas as pd

    frames = []
    for o in outcomes:
        if o.results is not None:
            r = o.results
            bundles = [r.bundles.get(str(i), {}) for i in r.runs["run_id"]]
            extra: dict[str, Any] = {
                "campaign": f"{o.stem}-{o.profile}",
                "kernel": [run_kernel(b) for b in bundles],
                "attempts": [run_attempts(b) for b in bundles],
                "retry_reasons": [reasons_cell(b) for b in bundles],
            }
            frames.append(r.runs.assign(**extra))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _figure_lines(plan: PaperPlan, outcomes: list[CampaignOutcome], out: Path) -> list[str]:
    from reports import figures

    lines = []
    for o in outcomes:
        if o.results is None or o.results.complete.empty:
            continue
        for plot in figures.axis_figures(o.results, out / "figures" / o.stem):
            lines.append(f"![{o.stem}: {plot.title}](figures/{o.stem}/{plot.png.name})")
    return ["## Figures", "", *lines, ""] if lines else []


def write_reproduction(
    plan: PaperPlan, outcomes: list[CampaignOutcome], cc: tuple[str, ...] | None, out: Path
) -> Path:
    """OUT/: metrics.parquet and .csv, report.md (+ figures/), environment.json and
    verdicts.json; every file written atomically. Returns OUT/report.md."""
    import json

    from mprig import fsio

    out.mkdir(parents=True, exist_ok=True)
    metrics = metrics_frame(outcomes)
    with fsio.atomic_path(out / "metrics.parquet") as tmp:
        metrics.to_parquet(tmp)
    fsio.write_text(out / "metrics.csv", metrics.to_csv(index=False))
    summary = {"paper": plan.paper, "profile": outcomes[0].profile if outcomes else ""}
    env = {**summary, **environment(outcomes)}
    if found := reproduce_gaps.gaps(outcomes, PAPERS_DIR):
        env["incomplete"] = found  # a partial reproduction (--partial) says what is missing
        env["cells"] = reproduce_gaps.cells(outcomes, PAPERS_DIR)  # the n its cells hold
    fsio.write_text(out / "environment.json", json.dumps(env, indent=1, sort_keys=True) + "\n")
    return write_judgement(plan, outcomes, cc, out)


def write_judgement(
    plan: PaperPlan, outcomes: list[CampaignOutcome], cc: tuple[str, ...] | None, out: Path
) -> Path:
    """OUT/verdicts.json and report.md (+ figures/) from OUTCOMES: from results, or from a
    committed reproduction's own files (reports/reproduce_committed.py). Returns report.md."""
    import json

    from mprig import fsio

    summary = {"paper": plan.paper, "profile": outcomes[0].profile if outcomes else ""}
    verdicts = {**summary, **verdict_summary(plan.paper, outcomes)}
    fsio.write_text(out / "verdicts.json", json.dumps(verdicts, indent=1) + "\n")
    text = render(plan, outcomes, cc) + "\n".join(_figure_lines(plan, outcomes, out))
    return fsio.write_text(out / "report.md", text)


def reproduce(
    paper: str,
    profile: str,
    results_root: Path,
    out: Path,
    run: bool,
    partial: bool = False,
    min_n: int | None = None,
) -> Path:
    """Optionally run a paper's campaigns, then write OUT/<paper>/ (core, full: refused with
    runs never run, unless PARTIAL, or with a cell under MIN_N runs) or OUT/<paper>-quick/.
    Returns its report.md."""
    if paper not in PAPERS:
        raise UsageError(f"paper {paper!r}: no such paper (papers: {', '.join(PAPERS)})")
    plan = PAPERS[paper]
    if run:
        run_campaigns(plan, profile, results_root)
    outcomes = [load_outcome(stem, profile, results_root) for stem in plan.campaigns]
    name = paper if profile in COMMITTED else f"{paper}-{profile}"
    if profile in COMMITTED and not partial:
        reproduce_gaps.refuse(paper, profile, outcomes, PAPERS_DIR, str(out / name), min_n)
    cc = available_cc([o.results for o in outcomes if o.results is not None]) or _local_cc()
    return write_reproduction(plan, outcomes, cc, out / name)
