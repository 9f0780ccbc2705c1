"""Tables of a campaign: per run, per (variant, sweep point) with confidence intervals, and
the layouts the papers print; rendered as Markdown, LaTeX (booktabs), CSV and HTML."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reports.results import Results, fmt_value, point_label, short_axis
from reports.stats import summary_ci

if TYPE_CHECKING:
    import pandas as pd


def markdown_table(rows: list[dict[str, str]]) -> list[str]:
    """Rows of equal keys as a Markdown table."""
    if not rows:
        return []
    keys = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(r.get(k, "") for k in keys) + " |" for r in rows]
    return lines


@dataclass(frozen=True)
class Display:
    """How a metric column is shown: label with unit, scale from the stored unit, digits."""

    column: str
    label: str
    scale: float
    digits: int


# The papers' metrics first (paper 000 Table III order), then rates. KB is 1024 bytes: paper
# 003's OOO-BO values are multiples of 1400 B / 1024 (5.5, 6.8, 9.6, 10.9 KB).
PAPER_METRICS = (
    Display("ooo_max_bytes", "OOO-BO (KB)", 1 / 1024, 1),
    Display("ooo_ratio", "OOO-R (%)", 100, 1),
    Display("link_util", "LU (%)", 100, 2),
)
RATE_METRICS = (
    Display("throughput_bps", "Throughput (Mbit/s)", 1e-6, 2),
    Display("goodput_bps", "Goodput (Mbit/s)", 1e-6, 2),
)
# Campaigns with cross traffic or a shared bottleneck (collectors/cross.py): Jain's index
# over the run's connection and the competing flows, and each one's share of what they got.
FAIRNESS_METRICS = (
    Display("jain_index", "Jain's index", 1, 3),
    Display("main_share", "Main share (%)", 100, 1),
    Display("cross_share", "Share (%)", 100, 1),  # `cross_share.<flow>`: "Share cell.1 (%)"
)
OTHER_METRICS = (
    Display("iperf3_bps", "iperf3 (Mbit/s)", 1e-6, 2),
    Display("ooo_mean_bytes", "OOO mean (KB)", 1 / 1024, 1),
    Display("rcvbuf_k_max_bytes", "Rcv buffer K (KB)", 1 / 1024, 1),
    Display("goodput_k_p5_bps", "Block goodput p5 (Mbit/s)", 1e-6, 2),
    Display("retransmitted_packets", "Retransmitted (pkts)", 1, 0),
    Display("reinjected_bytes", "Reinjected (KB)", 1 / 1024, 1),
)
DISPLAYS = {d.column: d for d in (*PAPER_METRICS, *RATE_METRICS, *FAIRNESS_METRICS, *OTHER_METRICS)}


def display_of(column: str) -> Display:
    """Display of a column; per-path columns (`throughput_bps.wifi`) inherit their base."""
    if column in DISPLAYS:
        return DISPLAYS[column]
    base, _, path = column.partition(".")
    if base in DISPLAYS:
        d = DISPLAYS[base]
        return Display(column, d.label.replace(" (", f" {path} (", 1), d.scale, d.digits)
    return Display(column, column, 1.0, 3)


@dataclass(frozen=True)
class Table:
    """One table: numbers for CSV, formatted strings for Markdown, LaTeX and HTML."""

    key: str  # file stem, e.g. "summary"
    title: str
    data: pd.DataFrame  # numeric, long or wide (CSV)
    display: pd.DataFrame  # strings, index shown as leading columns
    note: str = ""


NBSP = "\u00a0"  # joins the parts of one value: a table never wraps inside it
THIN = "\u202f"  # narrow no-break space: the thousands separator


def fmt(value: Any, digits: int = 2) -> str:
    """A number for a table cell; NaN and None become an en dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float | int):
        return f"{value:,.{digits}f}".replace(",", THIN)
    return str(value)


def sig(value: float | None, digits: int = 3) -> str:
    """VALUE to DIGITS significant figures as %g prints them (no trailing zeros) but never in
    exponent form; thousands joined by a narrow no-break space; None, NaN and infinities
    become an en dash. The one number format of the reproduction views (report.md,
    report.html, docs/papers.md)."""
    if value is None or not math.isfinite(value):
        return "–"
    decimals = digits - 1 - math.floor(math.log10(abs(value))) if value else 0
    text = f"{round(value, decimals):,.{max(decimals, 0)}f}"
    return (text.rstrip("0").rstrip(".") if "." in text else text).replace(",", THIN)


def _group_keys(results: Results) -> list[str]:
    return ["variant", *results.axes]


SUMMARY_COLUMNS = ("metric", "mean", "ci_low", "ci_high", "n", "ci_method")
# Every metric mprig collects is a rate, a count, a size or a fraction: none is negative.
SUMMARY_NOTE = (
    "mean ± half-width of the 95 % Student-t interval over repetitions; [low, high] where "
    "the interval was clipped at 0 (the quantity cannot be negative); no interval below "
    "n = 3 (n too small)"
)


def summary_long(results: Results) -> pd.DataFrame:
    """One row per (variant, sweep point, metric): mean, 95 % interval, n, how made."""
    import pandas as pd

    rows = []
    columns = [*_group_keys(results), *SUMMARY_COLUMNS]
    frame = results.complete
    if frame.empty:
        return pd.DataFrame(columns=columns)
    for key, group in frame.groupby(_group_keys(results), dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        for metric in results.metrics:
            ci = summary_ci(group[metric])
            if ci.n:
                rows.append((*key, metric, ci.mean, ci.low, ci.high, ci.n, ci.method))
    return pd.DataFrame(rows, columns=columns)


def _cell(mean: float, low: float, high: float, d: Display, method: str = "t") -> str:
    """`11.00 ± 2.48`, `100 [0, 530]` (clipped) or `11.00, n too small`, parts joined by
    no-break spaces."""
    shown = fmt(mean * d.scale, d.digits)
    if method == "n too small":
        return f"{shown},{NBSP}n{NBSP}too{NBSP}small"
    if math.isnan(low):
        return shown
    if method.endswith("clipped at 0"):
        return (
            f"{shown}{NBSP}[{fmt(low * d.scale, d.digits)},{NBSP}{fmt(high * d.scale, d.digits)}]"
        )
    return f"{shown}{NBSP}±{NBSP}{fmt((high - low) / 2 * d.scale, d.digits)}"


def summary_table(results: Results) -> Table:
    """Mean ± 95 % CI half-width of every metric per (variant, sweep point), with n."""
    import pandas as pd

    long = summary_long(results)
    keys = _group_keys(results)
    metrics = set(long["metric"])
    shown = [m for m in DISPLAYS if m in metrics]
    shown += sorted(m for m in metrics if m.startswith("cross_share."))  # each flow's share
    rows = []
    for key, group in long.groupby(keys, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        by_metric: dict[str, Any] = {r["metric"]: r for r in group.to_dict("records")}
        cells = [
            _summary_cell(by_metric[m], display_of(m)) if m in by_metric else "–" for m in shown
        ]
        n = max(int(r["n"]) for r in by_metric.values())
        rows.append([key[0], *(fmt_value(v) for v in key[1:]), *cells, str(n)])
    columns = [
        "variant",
        *(short_axis(a) for a in results.axes),
        *(display_of(m).label for m in shown),
        "n",
    ]
    return Table(
        "summary",
        "Mean ± 95 % CI (t) over repetitions",
        long,
        pd.DataFrame(rows, columns=columns),
        SUMMARY_NOTE,
    )


def _summary_cell(row: dict[str, Any], d: Display) -> str:
    return _cell(row["mean"], row["ci_low"], row["ci_high"], d, str(row["ci_method"]))


# Columns of the summary table `mprig report` prints on the terminal, when present.
TERMINAL = (
    "Throughput (Mbit/s)",
    "Goodput (Mbit/s)",
    "LU (%)",
    "OOO-R (%)",
    "Jain's index",
    "Main share (%)",
)
MAX_TERMINAL_ROWS = 20


def terminal_summary(results: Results) -> list[str]:
    """The summary table's headline cells, one line per (variant, sweep point), with the
    same numbers and intervals as the report: `  mptcp @ wifi.distance_m=50: Throughput
    (Mbit/s) 11.00 ± 2.48; ...; n 3`."""
    display = summary_table(results).display
    axes = [short_axis(a) for a in results.axes]
    shown = [c for c in TERMINAL if c in display.columns]
    lines = []
    for row in display.to_dict("records"):
        point = ", ".join(f"{a}={row[a]}" for a in axes)
        cells = "; ".join(f"{c} {row[c]}" for c in shown)
        text = f"  {row['variant']}{' @ ' + point if point else ''}: {cells}; n {row['n']}"
        lines.append(text.replace(NBSP, " ").replace(THIN, " "))
    if len(lines) > MAX_TERMINAL_ROWS:
        more = len(lines) - MAX_TERMINAL_ROWS
        lines = [*lines[:MAX_TERMINAL_ROWS], f"  ... and {more} more rows in the report"]
    return lines


def run_table(results: Results) -> Table:
    """One row per run: parameters, status and the headline metrics."""
    import pandas as pd

    runs = results.runs.sort_values(["variant", *results.axes, "repetition"], kind="stable")
    shown = [
        d for d in (*RATE_METRICS, *PAPER_METRICS, *FAIRNESS_METRICS) if d.column in runs.columns
    ]
    rows = []
    for r in runs.to_dict("records"):
        rows.append(
            [
                r["run_id"],
                r["variant"],
                *(fmt_value(r[a]) for a in results.axes),
                str(r["repetition"]),
                r["status"],
                *(fmt(_scaled(r[d.column], d), d.digits) for d in shown),
            ]
        )
    columns = [
        "run",
        "variant",
        *(short_axis(a) for a in results.axes),
        "rep",
        "status",
        *(d.label for d in shown),
    ]
    return Table("runs", "Runs", results.runs, pd.DataFrame(rows, columns=columns))


def _scaled(value: Any, d: Display) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value) * d.scale


def paper_table(results: Results) -> Table | None:
    """Paper 000 Table III layout: per sweep point and variant, OOO-BO KB / OOO-R % / LU %."""
    import pandas as pd

    long = summary_long(results)
    shown = [d for d in PAPER_METRICS if d.column in set(long["metric"])]
    if not shown:
        return None
    keys = _group_keys(results)
    rows = []
    ordered = [*results.axes, "variant"]
    for key, group in long.groupby(ordered, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        means = dict(zip(group["metric"], group["mean"], strict=True))
        point = dict(zip(results.axes, key[:-1], strict=True))
        rows.append(
            [
                point_label(point),
                key[-1],
                *(fmt(_scaled(means.get(d.column), d), d.digits) for d in shown),
            ]
        )
    display = pd.DataFrame(rows, columns=["point", "variant", *(d.label for d in shown)])
    data = long[long["metric"].isin([d.column for d in shown])][[*keys, "metric", "mean", "n"]]
    return Table(
        "paper",
        " / ".join(d.label for d in shown) + " per point and variant",
        data,
        display,
        "means over repetitions, as the papers print them",
    )


def pivot_tables(results: Results) -> list[Table]:
    """Paper 003 Table III/IV layout: one table per metric, variants as rows, points as columns."""
    import pandas as pd

    long = summary_long(results)
    if long.empty or not results.axes:  # one point: the summary table already says it all
        return []
    long = long.assign(
        point=[
            point_label(dict(zip(results.axes, vals, strict=True)))
            for vals in long[results.axes].itertuples(index=False)
        ]
    )
    tables = []
    for d in (*PAPER_METRICS, *RATE_METRICS):
        part = long[long["metric"] == d.column]
        if part.empty:
            continue
        wide = part.pivot_table(index="variant", columns="point", values="mean", sort=False)
        display = wide.map(lambda v, d=d: fmt(_scaled(v, d), d.digits)).reset_index()
        display.columns = [str(c) for c in display.columns]
        tables.append(
            Table(
                f"pivot_{d.column}",
                f"{d.label} per variant and point",
                wide.reset_index(),
                pd.DataFrame(display),
            )
        )
    return tables


def all_tables(results: Results) -> list[Table]:
    """Every table of a report, in report order."""
    tables = [summary_table(results)]
    paper = paper_table(results)
    if paper is not None:
        tables.append(paper)
    return [*tables, *pivot_tables(results), run_table(results)]


# --- renderers ---------------------------------------------------------------------------


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table with a heading."""
    cols = [str(c) for c in table.display.columns]
    lines = [
        f"### {table.title}",
        "",
        "| " + " | ".join(cols) + " |",
        "| " + " | ".join("---" for _ in cols) + " |",
    ]
    for row in table.display.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    if table.note:
        lines += ["", f"_{table.note}_"]
    return "\n".join(lines) + "\n"


_TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
    "±": r"$\pm$",
    "–": "--",
    NBSP: "~",
    THIN: r"\,",
}


def tex_escape(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in text)


def to_latex(table: Table) -> str:
    """A booktabs table (needs \\usepackage{booktabs})."""
    cols = [str(c) for c in table.display.columns]
    align = "l" * min(2, len(cols)) + "r" * max(0, len(cols) - 2)
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        rf"\caption{{{tex_escape(table.title)}}}",
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        " & ".join(tex_escape(c) for c in cols) + r" \\",
        r"\midrule",
    ]
    for row in table.display.itertuples(index=False):
        lines.append(" & ".join(tex_escape(str(v)) for v in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", rf"\label{{tab:{table.key}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    return str(table.data.to_csv(index=False))


def to_html(table: Table, css_class: str = "data") -> str:
    """An HTML table (escaped), with the table key as its id."""
    cols = [str(c) for c in table.display.columns]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in table.display.itertuples(index=False)
    )
    return (
        f'<table id="table-{html.escape(table.key)}" class="{css_class}" '
        'style="white-space:nowrap">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )
