"""`mprig reproduce SEED --profile full` writes reports/reproductions/SEED/ (metrics, report
with figures, environment, verdict counts), and docs/papers.md takes its numbers from there.
Built and checked on synthetic results of the real campaigns (tests/paper_synth.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import paper_synth as ps
import pytest

from mprig.cli import main as cli
from reports import paperplans, reproduce, reproduce_docs
from reports.refstats import VERDICTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("results")
    for stem in paperplans.PAPERS["000"].campaigns:
        reps = 5 if stem == "000-table1" else 2  # scenarios: keep the test light
        ps.write(results / f"{stem}-full", f"{stem}-full", repetitions=reps)
    out = tmp_path_factory.mktemp("reproductions")
    argv = ["reproduce", "000", "--profile", "full", "--results", str(results), "--out", str(out)]
    assert cli.main(argv) == 0  # the command: report.md, then report.html beside it
    return out / "000"


def test_the_directory_holds_metrics_report_environment_and_verdicts(written: Path) -> None:
    names = sorted(p.name for p in written.iterdir())
    assert names == [
        "environment.json",
        "figures",
        "metrics.csv",
        "metrics.parquet",
        "report.html",
        "report.md",
        "verdicts.json",
    ]
    metrics = pd.read_parquet(written / "metrics.parquet")
    assert len(metrics) == 4 * 3 * 5 + 9 * 10 * 2 + 9 * 10 * 2
    assert len(pd.read_csv(written / "metrics.csv")) == len(metrics)
    assert set(metrics["campaign"]) == {f"{s}-full" for s in paperplans.PAPERS["000"].campaigns}


def test_environment_names_kernel_tools_and_rig_mode(written: Path) -> None:
    env = json.loads((written / "environment.json").read_text())
    assert (env["paper"], env["profile"], env["kernels"], env["rig_modes"]) == (
        "000",
        "full",
        ["6.12.0-synthetic"],
        ["virtual"],
    )
    assert env["acceleration"] == ["unrecorded"]  # run.json does not say KVM or emulation
    assert env["tools"] == {"iperf3": ["3.18"]}
    table1 = env["campaigns"]["000-table1-full"]
    assert (table1["runs"], table1["complete"]) == (60, 60)
    # what reports/reproduce_committed.py judges a committed reproduction's checks against
    assert table1["congestion_controls"] == env["congestion_controls"]
    assert env["congestion_controls"] is not None and "lia" in env["congestion_controls"]


def test_verdict_counts_add_up_to_the_checks(written: Path) -> None:
    v = json.loads((written / "verdicts.json").read_text())
    assert list(v["counts"]) == list(VERDICTS)
    assert sum(v["counts"].values()) == len(v["checks"]) == 64  # every reference of paper 000
    per = {k: sum(c.values()) for k, c in v["campaigns"].items()}
    assert sum(per.values()) == len(v["checks"])
    t1 = {c["id"]: c for c in v["checks"] if c["id"].startswith("000-t1-")}
    assert len(t1) == 6 and all(c["n"] == 5 and c["n_base"] == 5 for c in t1.values())


def test_report_prints_one_value_per_cell_and_links_its_figures(written: Path) -> None:
    text = (written / "report.md").read_text()
    v = json.loads((written / "verdicts.json").read_text())
    ns3 = {c["id"]: reproduce.fmt_number(c["ours"]) for c in v["checks"] if "-t1-ns3-" in c["id"]}
    ns3_section = text.split("Table I, NS-3 column")[1].splitlines()
    table = next(line for line in ns3_section if line.startswith("| 10 | "))
    row = [cell.strip() for cell in table.strip("|").split("|")]
    assert ns3["000-t1-ns3-0ms"] in row  # the table's gain cell is the verdict's number
    verdict_row = next(line for line in text.splitlines() if line.startswith("| 000-t1-ns3-0ms"))
    assert f"| {ns3['000-t1-ns3-0ms']} |" in verdict_row
    links = [line for line in text.splitlines() if line.startswith("![")]
    assert links and all((written / line.split("](")[1].rstrip(")")).is_file() for line in links)


def test_docs_papers_md_agrees_with_the_committed_reproductions() -> None:
    """docs/papers.md's numbers come from reports/reproductions (make papers-docs)."""
    text = (ROOT / "docs" / "papers.md").read_text()
    start, end = text.index(reproduce_docs.DOCS_BEGIN), text.index(reproduce_docs.DOCS_END)
    assert text[start : end + len(reproduce_docs.DOCS_END)] == reproduce_docs.docs_section()


def test_docs_section_reads_the_verdict_counts(written: Path, tmp_path: Path) -> None:
    docs = tmp_path / "papers.md"
    docs.write_text(f"intro\n{reproduce_docs.DOCS_BEGIN}\nstale\n{reproduce_docs.DOCS_END}\nrest\n")
    assert reproduce_docs.update_docs(docs, written.parent) is True
    v = json.loads((written / "verdicts.json").read_text())
    row = "| 000 | full | " + " | ".join(str(v["counts"][k]) for k in VERDICTS)
    assert row + " | virtual, unrecorded, 6.12.0-synthetic |" in docs.read_text()
    assert "| 001 | – |" in docs.read_text() and "stale" not in docs.read_text()
    for o in v["orderings"]:  # Table I's orderings and Table III's at 70 m, with verdicts
        assert (
            f"| 000 | {o['title']} | {', '.join(o['steps'])} | {o['verdict']} |" in docs.read_text()
        )
    assert len(v["orderings"]) == 5
    compared = [c for c in v["checks"] if c["verdict"] != "not comparable"]
    paper = {c["id"]: reproduce.fmt_number(float(c["paper"])) for c in compared}
    assert compared and all(
        f"| {c['id']} | {paper[c['id']]} | " in docs.read_text() for c in compared
    )
    t1 = next(c for c in compared if c["id"] == "000-t1-ns3-0ms")
    fmt = reproduce.fmt_number
    ours = f"{fmt(t1['ours'])} [{fmt(t1['low'])}, {fmt(t1['high'])}]"
    assert f"| 000-t1-ns3-0ms | 90 | {ours} | 5 | {t1['verdict']} |" in docs.read_text()
    assert reproduce_docs.update_docs(docs, written.parent) is False


@pytest.mark.parametrize("paper", list(paperplans.PAPERS))
def test_a_papers_report_has_a_section_for_every_campaign_file(paper: str, tmp_path: Path) -> None:
    """A campaign added to experiments/papers/ but not to the paper's plan would never run."""
    report = reproduce.reproduce(paper, "quick", tmp_path / "results", tmp_path, run=False)
    sections = [line[3:] for line in report.read_text().splitlines() if line.startswith("## ")]
    files = sorted(p.stem for p in paperplans.PAPERS_DIR.glob(f"{paper}-*-quick.yaml"))
    assert sorted(s for s in sections if s.endswith("-quick")) == files


def test_core_profile_reports_its_campaigns_and_names_the_ones_it_leaves_out(
    tmp_path: Path,
) -> None:
    """`--profile core` is committed like full (reports/reproductions/SEED/) and says which
    of the paper's campaigns only the full profile runs, instead of 'no results'."""
    results = tmp_path / "results"
    ps.write(results / "003-scenario1-core", "003-scenario1-core")
    report = reproduce.reproduce("003", "core", results, tmp_path / "out", run=False)
    assert report == tmp_path / "out" / "003" / "report.md"
    text = report.read_text()
    assert "90 of 90 runs complete" in text
    for stem in ("003-scenario2", "003-scenario3", "003-scenario4"):
        section = text.split(f"## {stem}-core")[1].split("\n## ")[0]
        assert f"Not part of the core profile: no {stem}-core.yaml" in section
        assert "No results" not in section
    v = json.loads((tmp_path / "out" / "003" / "verdicts.json").read_text())
    assert v["profile"] == "core" and list(v["campaigns"]) == [
        f"{s}-core" for s in paperplans.PAPERS["003"].campaigns
    ]
    assert sum(v["campaigns"]["003-scenario1-core"].values()) > 0


def test_a_core_or_full_profile_with_runs_never_run_is_not_written_over_the_committed_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full profile runs over many sessions: a reproduction written halfway would replace
    the committed one, and docs/papers.md's numbers, with part of one. Refused, naming what
    is missing; --partial writes it and says so."""
    results, out = tmp_path / "results", tmp_path / "out"
    ps.write(results / "004-fig7-full", "004-fig7-full")  # 4 of the 5 campaigns never ran
    root = ps.write(results / "004-fig6c-full", "004-fig6c-full")
    runs = pd.read_parquet(root / "runs.parquet")
    runs.iloc[:6].to_parquet(root / "runs.parquet")  # 6 of 60 ran: the session ended
    (out / "004").mkdir(parents=True)
    (out / "004" / "report.md").write_text("committed\n")
    argv = ["reproduce", "004", "--profile", "full", "--results", str(results), "--out", str(out)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "004-fig6c-full: 54 of 60 planned runs never ran" in err
    assert "004-fig4-full: no results" in err and "004-fig7-full" not in err
    assert "--partial" in err and (out / "004" / "report.md").read_text() == "committed\n"

    assert cli.main([*argv, "--partial"]) == 0
    text = (out / "004" / "report.md").read_text()
    assert text.splitlines()[2].startswith("**Partial reproduction:** 004-fig4-full: no results")
    assert "6 of 60 runs complete; 54 planned runs never ran" in text
    env = json.loads((out / "004" / "environment.json").read_text())
    assert (
        "004-fig6c-full: 54 of 60 planned runs never ran (a cell holds 0-2 complete runs of its 5)"
        in env["incomplete"]
    )
    # every campaign complete: written without --partial, and nothing says partial
    for stem in paperplans.PAPERS["004"].campaigns:
        ps.write(results / f"{stem}-full", f"{stem}-full", repetitions=1)
    assert cli.main(argv) == 0
    assert "Partial" not in (out / "004" / "report.md").read_text()
    assert "incomplete" not in json.loads((out / "004" / "environment.json").read_text())


THIN = "\u202f"  # the thousands separator of every view (reports.tables.sig)
OOO_BO = {"id": "000-t3-70m-dsack-ooo-bo", "verdict": "uninformative", "paper": 106.0,
          "ours": 2044.5, "low": 988.53, "high": 3100.4, "n": 5}  # fmt: skip


def test_docs_print_thousands_as_the_html_does_never_in_exponent_form() -> None:
    """docs/papers.md printed OOO-BO as 2.04e+03 where report.html prints 2 040."""
    from reports import reproduce_html

    (row,) = reproduce_docs.checked_lines({"000": {"checks": [OOO_BO]}})[3:]
    ours = f"2{THIN}040 [989, 3{THIN}100]"
    assert row == f"| 000-t3-70m-dsack-ooo-bo | 106 | {ours} | 5 | uninformative |"
    values = (2044.5, 55.26, -42.56, 0.012345, 750000.0, 1234567.0)
    assert [reproduce.fmt_number(x) for x in values] == [reproduce_html.sig(x) for x in values]


def test_the_reports_orderings_print_thousands_without_exponents() -> None:
    from reports import orderings
    from reports.references import Check

    c = Check("x", None, 1770.6, 5, "uninformative", "", 903.5, 2646.3)
    assert orderings._ours(c) == f"1{THIN}770 [904, 2{THIN}650]"


def test_a_gain_of_a_thousand_percent_is_a_finding_too() -> None:
    comp = paperplans.PAPERS["000"].comparisons[0]
    row = {comp.axis: "10", "mptcp Mbit/s": "19.5", "mptcp gain %": f"1{THIN}040",
           "tcp_best Mbit/s": "1.7"}  # fmt: skip
    assert reproduce.finding_lines([row], comp) == [
        f"- {comp.axis} = 10: mptcp 19.5 Mbit/s against 1.7 Mbit/s for tcp_best: not below it "
        f"(1{THIN}040 %)"
    ]


def test_a_controller_one_campaign_registered_is_not_called_unavailable() -> None:
    """Paper 000's Table I campaign loads only LIA; its scenario campaigns also register
    prr and prr_lia. Availability is per campaign: the report said PR-R "unavailable" while
    the scenario rows had run it."""
    from reports.reproduce_committed import KERNEL_OFFERS
    from reports.reproduce_rig import cc_lines

    common = ("reno", "cubic", "lia")
    lines = cc_lines(common, {"t1-full": common, "s1-full": (*common, "prr", "prr_lia")})
    text = "\n".join(lines)
    assert KERNEL_OFFERS.search(text).group(1) == "reno cubic lia"  # type: ignore[union-attr]
    assert (
        "Registered only for the campaigns whose variants use them: prr prr_lia (s1-full)." in lines
    )
    assert "- PR-R (`prr`): available to s1-full" in lines
    assert "- TCP-DOOR (`tcpdoor`): unavailable: 'door' is not in" in text
    assert "- Co-CC (RFC 6356 LIA) (`lia`): available" in lines
