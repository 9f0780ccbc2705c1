"""`mprig reproduce PAPER`: a paper's campaigns, then its reproduction report (report.md from
reports/reproduce.py, report.html from reports/reproduce_html.py) and, with --docs and
--html, the views rendered again from the committed reproductions alone.

A paper is named by its id (000 .. 004: experiments/papers/<id>-*.yaml, reports/references/,
reports/reproductions/<id>/), called PAPER here; a campaign's `seed:` is its random seed."""

from __future__ import annotations

import argparse
from pathlib import Path

from mprig.cli.argtypes import bounded_int
from reports.paperplans import COMMITTED, PAPERS, PROFILES, REPRODUCTIONS, campaign_file

EPILOG = """\
examples:
  mprig reproduce 000 --run              run paper 000's quick campaigns, collect, and write
                                         results/reproduce/000-quick/ (report.md,
                                         report.html, metrics, environment.json,
                                         verdicts.json)
  mprig reproduce 000 --profile core --run
                                         the cells of the paper's headline claims, five
                                         repetitions (about 45 min without KVM); writes
                                         reports/reproductions/000/ (committed)
  mprig reproduce 004 --profile full --run
                                         the paper's run lengths and repetitions over every
                                         cell (hours to days); reports/reproductions/004/
  mprig reproduce 000 --profile full --results reports/archived-runs --min-n 5
                                         the full profile from the committed archives once
                                         every cell holds 5 of its 30 repetitions
                                         (`make paper-shard ... SHARD=1/6` of each campaign)
  mprig reproduce 000 003                report from results already collected
  mprig reproduce 000 --profile core --from-committed
                                         judge reports/reproductions/000/ again from its
                                         committed metrics.parquet and environment.json:
                                         verdicts.json, report.md, report.html (runs
                                         nothing; then `make papers-docs`)
  mprig reproduce --docs docs/papers.md --html
                                         docs/papers.md's numbers and every committed
                                         reproduction's figures and report.html, from the
                                         committed files alone (`make papers-docs`; runs
                                         nothing)
  mprig reproduce --list                 the papers and their campaign files
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `reproduce` command."""
    p = subparsers.add_parser(
        "reproduce",
        help="run a paper's campaigns and write its reproduction report",
        description="Reproduce the papers' tables: campaigns in experiments/papers/, "
        "verdicts from reports/references/, setup differences.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("papers", nargs="*", metavar="PAPER", help="paper ids: 000 001 002 003 004")
    p.add_argument("--profile", choices=PROFILES, default="quick",
                   help="quick: CI-sized, n = 3; core: the headline cells, n = 5 (about 2.5 h "
                   "for all papers without KVM); full: every cell at the papers' run lengths "
                   "(days without KVM). Default: quick")  # fmt: skip
    p.add_argument("--run", action="store_true", help="run and collect the campaigns first")
    p.add_argument("--partial", action="store_true",
                   help="core and full profiles: write the reproduction although some of its "
                   "campaigns have not run every planned run (refused otherwise, so a "
                   "committed reproduction is never replaced by part of one); environment.json "
                   "and report.md then list what is missing")  # fmt: skip
    p.add_argument("--min-n", type=bounded_int(1, 1000, "runs per cell"), default=None, metavar="K",
                   help="core and full profiles: write the reproduction once every cell (a "
                   "variant at a sweep point) of every campaign holds at least K runs, though "
                   "not every planned repetition ran (paper 000's full profile plans 30; "
                   "`make paper-shard ... SHARD=1/6` runs 5 of each cell); report.md and "
                   "environment.json say how many runs each campaign's cells hold")  # fmt: skip
    p.add_argument("--results", type=Path, default=None, metavar="DIR")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="where PAPER/ goes (default: reports/reproductions for the core and "
                   "full profiles, RESULTS/reproduce for quick)")  # fmt: skip
    p.add_argument("--from-committed", action="store_true",
                   help="judge each PAPER's committed reproduction (under --out, default "
                   "reports/reproductions) again from its own metrics.parquet and "
                   "environment.json, without results/: verdicts.json, report.md and its "
                   "figures, report.html")  # fmt: skip
    p.add_argument("--list", action="store_true", help="list the papers and campaigns")
    p.add_argument("--docs", type=Path, default=None, metavar="FILE",
                   help="rewrite FILE's numbers section from reports/reproductions "
                   "(docs/papers.md; `make papers-docs`)")  # fmt: skip
    p.add_argument("--html", action="store_true",
                   help="draw the figures from metrics.parquet and render report.html again "
                   "in every reproduction directory under --out (default "
                   "reports/reproductions), from its committed files")  # fmt: skip
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Write one report per paper, or re-render the committed views; print where."""
    from reports import reproduce_committed, reproduce_html  # scipy, pandas: not for --help
    from reports.reproduce import reproduce

    if args.docs is not None or args.html:
        return rerender(args.docs, (args.out or REPRODUCTIONS) if args.html else None)
    if args.list or not args.papers:
        for paper, plan in PAPERS.items():
            files = [campaign_file(s, args.profile) for s in plan.campaigns]
            names = " ".join(f.name for f in files if f.is_file())
            print(f"{paper}  {plan.title}\n     {names or f'(no {args.profile} campaigns)'}")
        return 0 if args.list else 2
    results = args.results or Path("results")
    default = REPRODUCTIONS if args.profile in COMMITTED else results / "reproduce"
    out = args.out or default
    for paper in args.papers:
        if args.from_committed:
            report = reproduce_committed.rejudge(out / paper, args.results)
        else:
            report = reproduce(
                paper, args.profile, results, out, args.run, args.partial, args.min_n
            )
        print(report)
        print(reproduce_html.write(report.parent))
    return 0


def rerender(docs: Path | None, reproductions: Path | None) -> int:
    """DOCS' numbers section, and every figure and report.html under REPRODUCTIONS (either
    may be None): figures first, since the page embeds them."""
    from reports import reproduce_figures, reproduce_html  # matplotlib: not for --help
    from reports.reproduce_docs import update_docs

    if docs is not None:
        changed = update_docs(docs)
        print(f"{docs}: {'updated' if changed else 'up to date'}")
    if reproductions is not None:
        for root in reproduce_html.reproduction_dirs(reproductions):
            for png in reproduce_figures.redraw(root):
                print(png)
        for page in reproduce_html.write_all(reproductions):
            print(page)
    return 0
