"""A paper reproduction as one self-contained HTML file (OUT/<paper>/report.html): verdict
counts per campaign, the orderings the paper shows, every reference row (paper, ours with its
95 % interval, window, unit, n, verdict, instrument), the paper's comparison tables, the
figures, setup differences, environment and glossary.

It reads only the files `mprig reproduce` commits beside it (verdicts.json, environment.json,
metrics.parquet, figures/ and report.md's figure captions), so a committed reproduction
renders again without its results: `mprig reproduce --html` (`make papers-docs`)."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mprig import fsio
from mprig.errors import UsageError
from reports import instruments, orderings
from reports.paperplans import PAPERS, PaperPlan
from reports.references import shown_window
from reports.refspec import Entry, Reference, load_all
from reports.refstats import VERDICTS
from reports.reproduce import comparison_rows
from reports.results import Results
from reports.stats import MIN_N
from reports.tables import NBSP, sig

if TYPE_CHECKING:
    import pandas as pd

FIGURE_LINK = re.compile(r"^!\[(.*)\]\((figures/[^)]+\.png)\)$", re.M)  # report.md's figures

# What a verdict and an ordering's step mean (reports/references.py, reports/orderings.py).
VERDICT_TERMS = (
    ("reproduced", "our 95 % interval lies inside the window the paper's value and its "
     "tolerance allow"),
    ("contradicted", "our 95 % interval lies wholly outside the window"),
    ("inconclusive", "the interval straddles the window's edge; n_needed estimates the "
     "repetitions that would decide it"),
    ("uninformative", "the window includes the no-effect value (0 %, a ratio of 1) and the "
     "interval lies inside it or straddles its edge: a result inside it could not tell the "
     "paper's effect from none (wholly outside: contradicted)"),
    ("configuration check", "a configured quantity computed from the paths, not measured: "
     "counted apart"),
    ("not comparable", "no run, metric or kernel feature of this rig matches the paper's "
     "conditions"),
    ("holds", "ordering step: the 95 % interval of the difference (upper row minus lower "
     "row) lies above 0"),
    ("reversed", "ordering step: that interval lies below 0"),
    ("open", "ordering step: that interval includes 0"),
)  # fmt: skip


@dataclass(frozen=True)
class Committed:
    """One reproduction directory, as `mprig reproduce` writes it."""

    root: Path  # reports/reproductions/<paper>/
    verdicts: dict[str, Any]  # verdicts.json: counts, orderings, campaigns, checks
    environment: dict[str, Any]  # environment.json: kernels, tools, rig modes, runs
    metrics: pd.DataFrame  # metrics.parquet: every run of the paper's campaigns
    figures: tuple[tuple[str, Path], ...]  # (caption, PNG), in report.md's order


def read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UsageError(f"{path}: not found; `mprig reproduce PAPER` writes it")
    try:
        return upgraded(dict(json.loads(path.read_text())))
    except ValueError as e:
        raise UsageError(f"{path}: not JSON ({e})") from e


def upgraded(doc: dict[str, Any]) -> dict[str, Any]:
    """A verdicts.json or environment.json with its paper under "paper": those written
    before issue 20 part 3 name it "seed", as the committed reproductions did."""
    if "seed" not in doc or "paper" in doc:
        return doc
    return {("paper" if k == "seed" else k): v for k, v in doc.items()}


def paper_of(committed: Committed) -> str:
    """The paper verdicts.json names; UsageError for one mprig has no plan of."""
    paper = str(committed.verdicts.get("paper", ""))
    if paper not in PAPERS:
        where = committed.root / "verdicts.json"
        raise UsageError(f"{where}: paper {paper!r} is not a paper of mprig")
    return paper


def _figures(root: Path) -> tuple[tuple[str, Path], ...]:
    """report.md's figure links with their alt text as caption, then any PNG it does not link."""
    md = root / "report.md"
    linked = FIGURE_LINK.findall(md.read_text()) if md.is_file() else []
    out = [(caption, root / rel) for caption, rel in linked if (root / rel).is_file()]
    seen = {p for _, p in out}
    rest = sorted(p for p in (root / "figures").rglob("*.png") if p not in seen)
    return (*out, *((str(p.relative_to(root)), p) for p in rest))


def read(root: Path) -> Committed:
    """ROOT's committed files; a missing or unreadable one is a UsageError naming it."""
    import pandas as pd

    verdicts, env = read_json(root / "verdicts.json"), read_json(root / "environment.json")
    parquet = root / "metrics.parquet"
    try:
        metrics = pd.read_parquet(parquet)
    except (OSError, ValueError) as e:
        raise UsageError(f"{parquet}: unreadable ({e}); `mprig reproduce PAPER` writes it") from e
    return Committed(root, verdicts, env, metrics, _figures(root))


# --- pure builders -----------------------------------------------------------------------


def interval(low: float | None, high: float | None) -> str:
    """[low, high] in one unbreakable piece; an en dash when either end is unknown."""
    if low is None or high is None:
        return "–"
    return f"[{sig(low)},{NBSP}{sig(high)}]"


def _ci(c: dict[str, Any]) -> str:
    if c["low"] is not None:
        return interval(c["low"], c["high"])
    if c["verdict"] == "configuration check":
        return "not measured"
    return "n too small" if c["ours"] is not None and c["n"] < MIN_N else "–"


def instrument(metric: str) -> str:
    """The glossary's term and source for a runs.parquet column, else the column itself."""
    for t in instruments.GLOSSARY:
        column = t.column.removesuffix(".<path>")
        if metric == column or metric.startswith(column + "."):
            return f"{t.term}: {t.source}"
    return metric


def _window(c: dict[str, Any], ref: Reference | None) -> tuple[float | None, float | None]:
    """A check's window, from 0 when its quantity cannot be negative (shown_window)."""
    low, high = c.get("window") or (None, None)
    if ref is None or low is None or high is None:
        return low, high
    return shown_window(ref, (float(low), float(high)))


def reference_row(c: dict[str, Any], entry: Entry | None) -> dict[str, str]:
    """One verdicts.json check as display cells; unit, source and instrument from its entry."""
    ref = entry.ref if entry else None
    bound = {"at_most": f"≤{NBSP}", "at_least": f"≥{NBSP}"}.get(ref.kind, "") if ref else ""
    return {
        "id": c["id"],
        "source": ref.source if ref else "",
        "paper": bound + sig(c["paper"]) if c["paper"] is not None else "–",
        "ours": sig(c["ours"]),
        "ci": _ci(c),
        "window": interval(*_window(c, ref)),
        "unit": ref.unit if ref else "",
        "n": f"{c['n']} (base {c['n_base']})" if c.get("n_base") else str(c["n"]),
        "verdict": c["verdict"],
        "instrument": instrument(ref.metric) if ref else "",
        "why": str(c.get("reason") or ""),
    }


def campaign_rows(verdicts: dict[str, Any], env: dict[str, Any]) -> list[list[str]]:
    """Per campaign and in all: runs, complete runs and the count of every verdict."""
    runs = env.get("campaigns") or {}
    rows, total = [], [0] * (2 + len(VERDICTS))
    for name, counts in verdicts["campaigns"].items():
        cells = [runs.get(name, {}).get(k) for k in ("runs", "complete")]
        cells += [counts.get(v, 0) for v in VERDICTS]
        total = [t + (x or 0) for t, x in zip(total, cells, strict=True)]
        rows.append([name, *("–" if x is None else str(x) for x in cells)])
    return [*rows, ["all", *map(str, total)]]


def _ours(c: dict[str, Any] | None) -> str:
    if c is None or c["ours"] is None:
        return "–"
    if c["low"] is None:
        return f"{sig(c['ours'])}{NBSP}(n{NBSP}={NBSP}{c['n']})"
    return f"{sig(c['ours'])}{NBSP}{interval(c['low'], c['high'])}"


def ordering_rows(paper_id: str, verdicts: dict[str, Any]) -> list[dict[str, Any]]:
    """verdicts.json's orderings with the paper's values (reports/orderings.py) and ours."""
    paper = {o.title: o.paper for o in orderings.ORDERINGS.get(paper_id, ())}
    checks = {c["id"]: c for c in verdicts["checks"]}
    return [
        {
            "title": o["title"],
            "paper": paper.get(o["title"], ""),
            "ours": [_ours(checks.get(i)) for i in o["ids"]],
            "steps": ", ".join(o["steps"]),
            "verdict": o["verdict"],
        }
        for o in verdicts["orderings"]
    ]


def campaign_runs(metrics: pd.DataFrame, campaign: str) -> pd.DataFrame:
    """One campaign's rows of metrics.parquet, without the columns it never filled."""
    runs = metrics[metrics["campaign"] == campaign].dropna(axis=1, how="all")
    return runs.reset_index(drop=True)


def campaign_results(metrics: pd.DataFrame, campaign: str) -> Results:
    """One campaign's runs from metrics.parquet, as the Results the comparisons read."""
    return Results(Path(campaign), campaign, {}, (), campaign_runs(metrics, campaign))


def comparison_tables(plan: PaperPlan, profile: str, metrics: pd.DataFrame) -> list[Any]:
    """(index, comparison, rows) for every comparison of PLAN with complete runs."""
    out = []
    for i, comp in enumerate(plan.comparisons):
        results = campaign_results(metrics, f"{comp.campaign}-{profile}")
        rows = comparison_rows(results, comp) if len(results.runs) else []
        if rows:
            out.append((i, comp, rows))
    return out


def environment_rows(env: dict[str, Any]) -> list[tuple[str, str]]:
    """What the runs ran on: rig mode, acceleration, kernel, then each tool's versions."""
    rows = [
        (item, ", ".join(env.get(key) or ["unrecorded"]))
        for item, key in (("rig mode", "rig_modes"), ("acceleration", "acceleration"),
                          ("kernel", "kernels"))
    ]  # fmt: skip
    return rows + [(tool, ", ".join(v)) for tool, v in (env.get("tools") or {}).items()]


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def render(plan: PaperPlan, committed: Committed) -> str:
    """The reproduction report as one HTML file; figures embedded as data URIs."""
    from reports.html import render as render_template

    v = committed.verdicts
    profile = str(v.get("profile", ""))
    entries = load_all()
    rows = [reference_row(c, entries.get(c["id"])) for c in v["checks"]]
    return render_template(
        "reproduce.html.j2",
        plan=plan,
        profile=profile,
        counts=v["counts"],
        verdict_names=VERDICTS,
        campaigns=campaign_rows(v, committed.environment),
        orderings=ordering_rows(plan.paper, v),
        compared=[r for r in rows if r["verdict"] != "not comparable"],
        not_comparable=[r for r in rows if r["verdict"] == "not comparable"],
        reasons=any(r["why"] for r in rows),  # verdicts.json before `reason`: no column
        comparisons=comparison_tables(plan, profile, committed.metrics),
        figures=[(caption, _data_uri(png)) for caption, png in committed.figures],
        environment=environment_rows(committed.environment),
        verdict_terms=VERDICT_TERMS,
        glossary=instruments.GLOSSARY,
    )


# --- I/O edge ----------------------------------------------------------------------------


def write(root: Path) -> Path:
    """ROOT/report.html from ROOT's committed files; returns its path."""
    committed = read(root)
    return fsio.write_text(root / "report.html", render(PAPERS[paper_of(committed)], committed))


def reproduction_dirs(reproductions: Path) -> list[Path]:
    """The directories of REPRODUCTIONS that hold a verdicts.json, in paper order."""
    return [d for d in sorted(reproductions.iterdir()) if (d / "verdicts.json").is_file()]


def write_all(reproductions: Path) -> list[Path]:
    """report.html in every reproduction directory of REPRODUCTIONS."""
    return [write(d) for d in reproduction_dirs(reproductions)]
