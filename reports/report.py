"""Assemble a campaign report: tables, figures, paper references, environment, failures,
warnings and missing runs; write it as HTML (one self-contained file), Markdown, LaTeX and
CSV. `write_report` is the I/O edge; everything above it builds plain records."""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mprig import fsio
from mprig.errors import UsageError
from reports import instruments
from reports import tables as tb
from reports.plotting import Plot
from reports.references import Check, shown_window
from reports.results import Results, point_label

FORMATS = ("html", "md", "tex", "csv")


@dataclass(frozen=True)
class RunWarning:
    """A run.json flag worth a reader's attention (capture drops, impairment deviation)."""

    run_id: str
    flag: str
    detail: str = ""


@dataclass(frozen=True)
class Report:
    """Everything a report shows."""

    results: Results
    tables: list[tb.Table]
    checks: list[Check]
    plots: list[Plot] = field(default_factory=list)
    generated: str = field(
        default_factory=lambda: time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    )

    @property
    def counts(self) -> dict[str, int]:
        r = self.results
        return {
            "planned": len(r.planned) or len(r.runs),
            "complete": len(r.complete),
            "failed": len(r.runs) - len(r.complete),
            "missing": len(r.missing),
        }

    @property
    def warnings(self) -> list[RunWarning]:
        return run_warnings(self.results)

    @property
    def environment(self) -> list[dict[str, str]]:
        return environment(self.results)


def run_warnings(results: Results) -> list[RunWarning]:
    """Flags from run.json, plus capture kernel drops even when no flag was set."""
    out = []
    for run_id, bundle in sorted(results.bundles.items()):
        flags = [str(f) for f in bundle.get("flags") or []]
        drops = {
            h: n for h, n in ((bundle.get("capture") or {}).get("kernel_drops") or {}).items() if n
        }
        for flag in flags:
            detail = ", ".join(f"{h}: {n} dropped" for h, n in drops.items())
            out.append(RunWarning(run_id, flag, detail if flag == "capture_drops" else ""))
        if drops and "capture_drops" not in flags:
            out.append(
                RunWarning(
                    run_id,
                    "capture_drops",
                    ", ".join(f"{h}: {n} dropped" for h, n in drops.items()),
                )
            )
    return out


def environment(results: Results) -> list[dict[str, str]]:
    """Per host: the kernels and tool versions seen across the campaign's runs."""
    seen: dict[str, dict[str, set[str]]] = {}
    for bundle in results.bundles.values():
        for host, facts in (bundle.get("hosts") or {}).items():
            entry = seen.setdefault(host, {})
            entry.setdefault("kernel", set()).add(str(facts.get("kernel", "?")))
            for tool, version in (facts.get("tools") or {}).items():
                entry.setdefault(tool, set()).add(str(version))
        for key in ("rig_mode",):
            if key in bundle:
                seen.setdefault("rig", {}).setdefault(key, set()).add(str(bundle[key]))
        version = (bundle.get("mprig") or {}).get("version")
        if version:
            seen.setdefault("rig", {}).setdefault("mprig", set()).add(str(version))
    if ss := ss_interval_text([(b.get("capture") or {}) for b in results.bundles.values()]):
        seen.setdefault("rig", {})["ss interval"] = {ss}
    if caches := flushed_text(list(results.bundles.values())):
        seen.setdefault("rig", {})["tcp metrics cache"] = {caches}
    return [
        {"host": host, "item": item, "value": ", ".join(sorted(values))}
        for host, items in sorted(seen.items())
        for item, values in sorted(items.items(), key=lambda kv: (kv[0] != "kernel", kv[0]))
    ]


def ss_interval_text(captures: list[dict[str, Any]]) -> str:
    """The ss sampler's achieved interval over the runs (run.json `capture.ss_interval`):
    `median 0.100-0.101 s, p95 up to 0.102 s (configured 0.1 s, 4 runs)`."""
    got = [c["ss_interval"] for c in captures if (c.get("ss_interval") or {}).get("median_s")]
    if not got:
        return ""
    medians, p95 = [g["median_s"] for g in got], max(g["p95_s"] for g in got)
    want = ", ".join(sorted({f"{g['configured_s']:g}" for g in got}))
    return (
        f"median {min(medians):.3f}-{max(medians):.3f} s, p95 up to {p95:.3f} s "
        f"(configured {want} s, {len(got)} runs)"
    )


def flushed_text(bundles: list[dict[str, Any]]) -> str:
    """Whether the runs started with the kernel's TCP metrics cache flushed on client and
    server (run.json `hosts.<host>.flushed`, docs/running.md "Run isolation")."""
    if not bundles:
        return ""
    hosts = [b.get("hosts") or {} for b in bundles]
    done = sum(all((h.get(x) or {}).get("flushed") for x in ("client", "server")) for h in hosts)
    n = f"{len(bundles)} run{'s' if len(bundles) > 1 else ''}"
    if done == len(bundles):
        return f"flushed before every run ({n})"
    if not done:
        return f"not flushed ({n} made before mprig flushed it)"
    return f"flushed before {done} of {n} (the others made before mprig flushed it)"


def build(results: Results, plots: list[Plot], checks: list[Check]) -> Report:
    tables = tb.all_tables(results)
    if "throughput_bps" in results.runs.columns and not results.complete.empty:
        tables.insert(1, instruments.instrument_table(results))
    return Report(results, tables, checks, plots)


# --- rendering ---------------------------------------------------------------------------


def _interval(low: float, high: float) -> str:
    """A 95 % interval or window as [low, high]; "–" when unknown (n < 2)."""
    if math.isnan(low) or math.isnan(high):
        return "–"
    return f"[{tb.fmt(low, 2)}, {tb.fmt(high, 2)}]"


def _window_cell(c: Check) -> str:
    """The window as [low, high], from 0 for a quantity that cannot be negative."""
    if not c.window:
        return "–"
    return _interval(*(shown_window(c.entry.ref, c.window) if c.entry else c.window))


def check_rows(checks: Iterable[Check]) -> list[dict[str, str]]:
    """References as display rows: ours next to the paper's."""
    rows = []
    for c in checks:
        e = c.entry
        rows.append(
            {
                "id": c.id,
                "paper": f"{e.paper.id} {e.paper.title}" if e else "",
                "source": e.ref.source if e else "",
                "setup": e.ref.setup if e else "",
                "paper_value": tb.fmt(e.ref.value, 2) if e else "",
                "bound": {"at_most": "≤ ", "at_least": "≥ "}.get(e.ref.kind, "") if e else "",
                "ours": tb.fmt(c.ours, 2) if c.ours is not None else "–",
                "unit": e.ref.unit if e else "",
                "difference": tb.fmt(c.difference, 2) if c.difference is not None else "–",
                "tolerance": str(e.tolerance) if e else "",
                "ci": _interval(c.low, c.high),
                "window": _window_cell(c),
                "n": str(c.n) + (f" (base {c.n_base})" if c.n_base else ""),
                "n_needed": str(c.n_needed) if c.n_needed else "",
                "verdict": c.verdict,
                "reason": c.reason,
            }
        )
    return rows


def _missing_rows(results: Results) -> list[dict[str, str]]:
    return [
        {
            "run_id": m["run_id"],
            "variant": m["variant"],
            "repetition": str(m["repetition"]),
            "point": point_label(m["point"]),
        }
        for m in results.missing
    ]


def _failed_rows(results: Results) -> list[dict[str, str]]:
    failed = results.failed
    return [
        {
            "run_id": str(r["run_id"]),
            "variant": str(r["variant"]),
            "status": str(r["status"]),
            "point": point_label({a: r[a] for a in results.axes}),
            "reason": str(r["reason"]),
        }
        for r in failed.to_dict("records")
    ]


ENGINE_COLUMNS = ["run_id", "engine", "lag_p95_ms", "lag_max_ms", "packets", "verdict"]


def engine_rows(results: Results) -> list[dict[str, str]]:
    """One row per run carried by a simulated link (run.json `engine`): its lag figures and
    the real-time verdict (a run that is not real-time is left out of the numbers)."""
    rows = []
    for run_id, bundle in sorted(results.bundles.items()):
        e = bundle.get("engine")
        if not isinstance(e, dict):
            continue
        limits = e.get("limits") or {}
        ok = "real-time" if e.get("realtime") else "not real-time (left out of the numbers)"
        rows.append(
            {
                "run_id": run_id,
                "engine": str(e.get("kind", "?")),
                "lag_p95_ms": f"{e.get('lag_p95_ms')} (limit {limits.get('lag_p95_ms')})",
                "lag_max_ms": f"{e.get('lag_max_ms')} (limit {limits.get('lag_max_ms')})",
                "packets": str(e.get("packets")),
                "verdict": ok,
            }
        )
    return rows


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def render_html(report: Report) -> str:
    """The whole report as one HTML file; figures embedded as data URIs."""
    import yaml

    from reports.html import render

    return render(
        "report.html.j2",
        name=report.results.name,
        description=report.results.spec.get("description", ""),
        root=str(report.results.root),
        generated=report.generated,
        counts=report.counts,
        checks=check_rows(report.checks),
        verdicts=verdict_counts(report.checks),
        warnings=report.warnings,
        failed=_failed_rows(report.results),
        missing=_missing_rows(report.results),
        tables=[(t, tb.to_html(t)) for t in report.tables],
        link_checks=instruments.link_checks(report.results),
        engines=engine_rows(report.results),
        glossary=instruments.GLOSSARY,
        plots=[(p, _data_uri(p.png)) for p in report.plots],
        environment=report.environment,
        spec=yaml.safe_dump(report.results.spec, sort_keys=False, width=100),
    )


def verdict_counts(checks: Iterable[Check]) -> dict[str, int]:
    from reports.refstats import VERDICTS

    counts: dict[str, int] = dict.fromkeys(VERDICTS, 0)
    for c in checks:
        counts[c.verdict] += 1
    return counts


def _md_list(title: str, rows: list[dict[str, str]], columns: list[str]) -> str:
    if not rows:
        return ""
    lines = [
        f"## {title}",
        "",
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
    ]
    lines += ["| " + " | ".join(r[c].replace("|", "\\|") for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n\n"


def render_markdown(report: Report, figures_dir: str = "figures") -> str:
    """The report as Markdown; figures linked (PNG) from FIGURES_DIR."""
    c = report.counts
    out = [
        f"# Report: {report.results.name}\n\n",
        f"{report.results.spec['description']}\n\n"
        if report.results.spec.get("description")
        else "",
        f"Results `{report.results.root}`, generated {report.generated}. Runs: {c['planned']}"
        f" planned, {c['complete']} complete, {c['failed']} failed, {c['missing']} missing.\n\n",
    ]
    out.append(
        _md_list(
            "Paper references",
            check_rows(report.checks),
            [
                "id",
                "source",
                "paper_value",
                "ours",
                "unit",
                "difference",
                "tolerance",
                "verdict",
                "reason",
            ],
        )
    )
    out.append(
        _md_list(
            "Failed runs",
            _failed_rows(report.results),
            ["run_id", "variant", "point", "status", "reason"],
        )
    )
    out.append(
        _md_list(
            "Missing runs (partial campaign)",
            _missing_rows(report.results),
            ["run_id", "variant", "point", "repetition"],
        )
    )
    warn = [{"run_id": w.run_id, "flag": w.flag, "detail": w.detail} for w in report.warnings]
    out.append(_md_list("Warnings", warn, ["run_id", "flag", "detail"]))
    out.append(
        _md_list("Link engines (ns-3 real time)", engine_rows(report.results), ENGINE_COLUMNS)
    )
    links = [c.__dict__ for c in instruments.link_checks(report.results)]
    out.append(_md_list("Link utilisation checks", links, ["run_id", "path", "verdict", "detail"]))
    out += [tb.to_markdown(t) + "\n" for t in report.tables]
    out += [f"![{p.title}]({figures_dir}/{p.png.name})\n\n" for p in report.plots]
    out.append(instruments.glossary_markdown())
    out.append(_md_list("Environment", report.environment, ["host", "item", "value"]))
    return "".join(out)


def references_table(checks: list[Check]) -> tb.Table:
    """Ours next to the paper's, as a table (LaTeX output)."""
    import pandas as pd

    rows = check_rows(checks)
    columns = ["id", "source", "paper_value", "ours", "unit", "difference", "verdict"]
    display = pd.DataFrame(
        [[r[c] if c != "paper_value" else r["bound"] + r[c] for c in columns] for r in rows],
        columns=columns,
    )
    return tb.Table(
        "references", "Paper references: ours next to the paper's", pd.DataFrame(rows), display
    )


def render_latex(report: Report) -> str:
    """Every table as a booktabs table, ready to \\input{}."""
    header = f"% mprig report of {report.results.name}; needs \\usepackage{{booktabs}}\n"
    tables = ([references_table(report.checks)] if report.checks else []) + report.tables
    return header + "\n".join(tb.to_latex(t) for t in tables)


def parse_formats(text: str, allowed: tuple[str, ...] = FORMATS) -> list[str]:
    """`--format html,md` as a list; UsageError naming what is unknown and what is allowed."""
    chosen = [f.strip() for f in text.split(",") if f.strip()]
    unknown = [f for f in chosen if f not in allowed]
    if unknown or not chosen:
        raise UsageError(
            f"--format: unknown {', '.join(unknown) or 'empty'}; choose from {','.join(allowed)}"
        )
    return chosen


def write_report(
    results: Results, out: Path, formats: list[str], overlays: Iterable[Results] = ()
) -> dict[str, Path]:
    """Write the chosen formats into OUT; returns format -> main file written. OVERLAYS:
    campaigns drawn on the same figures as RESULTS (reports/overlay.py)."""
    from reports import figures, overlay, references

    out.mkdir(parents=True, exist_ok=True)
    plots = figures.all_figures(results, out / "figures") if set(formats) - {"csv"} else []
    overlays = list(overlays)
    if overlays and set(formats) - {"csv"}:
        plots += overlay.overlay_figures([results, *overlays], out / "figures")
    report = build(results, plots, references.load_for(results))
    written: dict[str, Path] = {}
    if "csv" in formats:
        written["csv"] = _write_csv(report, out / "tables")
    if "tex" in formats:
        written["tex"] = _write(out / "report.tex", render_latex(report))
    if "md" in formats:
        written["md"] = _write(out / "report.md", render_markdown(report))
    if "html" in formats:
        written["html"] = _write(out / "report.html", render_html(report))
    return written


def _write_csv(report: Report, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for t in report.tables:
        fsio.write_text(directory / f"{t.key}.csv", tb.to_csv(t))
    if report.checks:
        import pandas as pd

        checks = pd.DataFrame(check_rows(report.checks))
        fsio.write_with(directory / "references.csv", lambda tmp: checks.to_csv(tmp, index=False))
    return directory


def _write(path: Path, text: str) -> Path:
    return fsio.write_text(path, text)
