"""A reproduction's HTML report (reports/reproduce_html.py), rendered from the files a
reproduction commits: verdicts.json, environment.json, metrics.parquet, figures/ and
report.md. Built on a small hand-written reproduction of paper 000, so each cell's value is
known; the committed reproductions must carry an up-to-date report.html."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from mprig.errors import UsageError
from reports import paperplans, reproduce_docs, reproduce_html

SECTIONS = [
    "verdicts",
    "orderings",
    "references",
    "comparisons",
    "figures",
    "differences",
    "environment",
    "glossary",
]
T1 = paperplans.PAPERS["000"].comparisons[0]  # Table I, Linux column: mptcp against tcp_best


def _check(ref_id: str, verdict: str, ours: float | None, n: int, **kw: object) -> dict:
    low, high, window = kw.get("low"), kw.get("high"), kw.get("window")
    return {"id": ref_id, "campaign": "000-table1-core", "verdict": verdict, "paper": kw["paper"],
            "ours": ours, "low": low, "high": high, "window": window, "n": n,
            "n_base": kw.get("n_base", 0), "n_needed": None}  # fmt: skip


VERDICTS = {
    "paper": "000",
    "profile": "core",
    "counts": {
        "reproduced": 0,
        "contradicted": 1,
        "inconclusive": 1,
        "uninformative": 0,
        "configuration check": 0,
        "not comparable": 1,
    },
    "orderings": [
        {
            "title": "Table I, NS-3 column: MPTCP's gain over TCP falls with the delay "
            "difference (0 > 100 > 500 ms)",
            "ids": ["000-t1-ns3-0ms", "000-t1-ns3-100ms", "000-t1-ns3-500ms"],
            "verdict": "inconclusive",
            "steps": ["open", "holds"],
        }
    ],
    "campaigns": {
        "000-table1-core": {
            "reproduced": 0,
            "contradicted": 1,
            "inconclusive": 1,
            "uninformative": 0,
            "configuration check": 0,
            "not comparable": 1,
        },
    },
    "checks": [
        _check(
            "000-t1-ns3-0ms",
            "contradicted",
            55.26,
            5,
            paper=90.0,
            low=52.74,
            high=57.76,
            window=[85.96, 94.04],
            n_base=5,
        ),
        _check("000-t1-linux-0ms", "inconclusive", 95.4, 2, paper=94.0, window=[92.27, 95.73]),
        _check("000-t3-50m-dsack-lu", "not comparable", None, 0, paper=14.06),
    ],
}
ENVIRONMENT = {
    "paper": "000",
    "profile": "core",
    "acceleration": ["unrecorded"],
    "campaigns": {"000-table1-core": {"complete": 12, "runs": 12}},
    "kernels": ["6.1.0-56-amd64"],
    "rig_modes": ["virtual-vm"],
    "tools": {"iperf3": ["iperf 3.12 (cJSON 1.7.15)"]},
}
FIGURE = "figures/000-table1/metrics_vs_axis0.png"
CAPTION = "000-table1: Throughput (Mbit/s) against p2.delay_ms (mean, 95 % t interval)"


def write_fixture(root: Path) -> Path:
    """ROOT/000/: the files `mprig reproduce 000 --profile core` commits, small."""
    d = root / "000"
    (d / FIGURE).parent.mkdir(parents=True)
    Image.new("RGB", (40, 30), "white").save(d / FIGURE)
    (d / "verdicts.json").write_text(json.dumps(VERDICTS))
    (d / "environment.json").write_text(json.dumps(ENVIRONMENT))
    (d / "report.md").write_text(f"# Reproduction\n\n## Figures\n\n![{CAPTION}]({FIGURE})\n")
    rows = [
        {
            "campaign": "000-table1-core",
            "run_id": f"{v}-{d_ms}-{r}",
            "variant": v,
            "status": "complete",
            "param.paths.p2.delay_ms": d_ms,
            "throughput_bps": (mbit + r / 10) * 1e6,
        }
        for v, mbit in (("mptcp", 18.0), ("tcp_best", 9.5))
        for d_ms in (10, 110)
        for r in range(3)
    ]
    pd.DataFrame(rows).to_parquet(d / "metrics.parquet")
    return d


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = write_fixture(tmp_path_factory.mktemp("reproductions"))
    return reproduce_html.render(paperplans.PAPERS["000"], reproduce_html.read(d))


def table(page: str, key: str) -> list[list[str]]:
    """The cells of <table id="table-KEY">, one list per body row, as text."""
    body = re.search(rf'<table id="table-{key}"[^>]*>.*?<tbody>(.*?)</tbody>', page, re.S)
    assert body, f"no table-{key}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1), re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r, re.S) for r in rows]
    return [[unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in row] for row in cells]


def test_every_section_is_there_in_order(page: str) -> None:
    assert re.findall(r'<h2 id="([\w-]+)"', page) == SECTIONS


def test_verdict_counts_per_campaign_with_its_runs(page: str) -> None:
    assert table(page, "campaigns") == [
        ["000-table1-core", "12", "12", "0", "1", "1", "0", "0", "1"],
        ["all", "12", "12", "0", "1", "1", "0", "0", "1"],
    ]


def test_a_compared_row_has_paper_ours_interval_window_unit_n_and_verdict(page: str) -> None:
    rows = {r[0]: r for r in table(page, "references")}
    nbsp = "\u00a0"
    assert rows["000-t1-ns3-0ms"][:9] == [
        "000-t1-ns3-0ms", "Table I", "90", "55.3", f"[52.7,{nbsp}57.8]", f"[86,{nbsp}94]",
        "%", "5 (base 5)", "contradicted",
    ]  # fmt: skip
    assert rows["000-t1-ns3-0ms"][9].startswith("Throughput: receiver capture")
    assert len(rows["000-t1-ns3-0ms"]) == 10  # no reason in this verdicts.json: no why column
    assert rows["000-t1-linux-0ms"][3:5] == ["95.4", "n too small"]  # below n = 3
    assert "000-t3-50m-dsack-lu" not in rows
    assert table(page, "not-comparable") == [["000-t3-50m-dsack-lu", "Table III", "14.1", "%"]]


def test_orderings_name_the_papers_values_ours_and_each_step(page: str) -> None:
    nbsp = "\u00a0"
    assert table(page, "orderings") == [
        [
            VERDICTS["orderings"][0]["title"],
            "90 > 80 > 20 %",
            f"55.3{nbsp}[52.7,{nbsp}57.8] > – > –",
            "open, holds",
            "inconclusive",
        ]
    ]


def test_the_papers_comparison_is_recomputed_from_the_metrics(page: str) -> None:
    assert table(page, "comparison-0") == [
        ["10", "18.1", "88.5", "9.6"],
        ["110", "18.1", "88.5", "9.6"],
    ]
    assert f"<h3>{T1.title}</h3>" in unescape(page)


def test_figures_are_embedded_with_their_captions(page: str) -> None:
    imgs = re.findall(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]+" alt="([^"]*)"', page)
    assert [unescape(a) for a in imgs] == [CAPTION]


def test_environment_and_glossary(page: str) -> None:
    assert table(page, "environment")[:3] == [
        ["rig mode", "virtual-vm"],
        ["acceleration", "unrecorded"],
        ["kernel", "6.1.0-56-amd64"],
    ]
    assert [r[0] for r in table(page, "verdict-terms")] == [
        "reproduced", "contradicted", "inconclusive", "uninformative", "configuration check",
        "not comparable", "holds", "reversed", "open",
    ]  # fmt: skip
    assert "Throughput" in [r[0] for r in table(page, "glossary")]
    assert 'href="../../../docs/metrics.md"' in page


def test_sig_rounds_to_significant_figures_without_exponents() -> None:
    thin = "\u202f"
    got = [reproduce_html.sig(x) for x in (2041.3, 55.26, -42.56, 0.012345, 0.0, None, 1e6)]
    assert got == [f"2{thin}040", "55.3", "-42.6", "0.0123", "0", "–", f"1{thin}000{thin}000"]


def test_a_missing_file_names_itself(tmp_path: Path) -> None:
    d = write_fixture(tmp_path)
    (d / "environment.json").unlink()
    with pytest.raises(UsageError, match=r"000/environment\.json"):
        reproduce_html.read(d)


def test_write_all_renders_every_reproduction_directory(tmp_path: Path) -> None:
    write_fixture(tmp_path)
    (tmp_path / "003").mkdir()  # no verdicts.json: not a reproduction yet
    assert reproduce_html.write_all(tmp_path) == [tmp_path / "000" / "report.html"]
    assert (tmp_path / "000" / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_files_that_name_the_paper_seed_are_still_read(tmp_path: Path) -> None:
    """verdicts.json and environment.json named their paper "seed" until issue 20 part 3,
    and reproductions were committed so."""
    d = write_fixture(tmp_path)
    for name, doc in (("verdicts.json", VERDICTS), ("environment.json", ENVIRONMENT)):
        old = {("seed" if k == "paper" else k): v for k, v in doc.items()}
        (d / name).write_text(json.dumps(old))
    committed = reproduce_html.read(d)
    assert committed.verdicts["paper"] == committed.environment["paper"] == "000"
    assert "seed" not in committed.verdicts and "seed" not in committed.environment
    assert "Reproduction of paper 000:" in reproduce_html.write(d).read_text()
    assert "| 000 | core |" in reproduce_docs.docs_section(tmp_path)


@pytest.mark.parametrize("paper", sorted(p.name for p in paperplans.REPRODUCTIONS.iterdir()))
def test_a_committed_reproduction_has_a_current_report_html(paper: str) -> None:
    """Like docs/papers.md, report.html is rendered from the committed files alone."""
    d = paperplans.REPRODUCTIONS / paper
    want = reproduce_html.render(paperplans.PAPERS[paper], reproduce_html.read(d))
    html = d / "report.html"
    assert html.is_file() and html.read_text() == want, "stale: run `make papers-docs`"


def test_a_recorded_reason_gets_a_why_column(tmp_path: Path) -> None:
    d = write_fixture(tmp_path)
    verdicts = json.loads((d / "verdicts.json").read_text())
    verdicts["checks"][0]["reason"] = "95 % CI [52.7, 57.8] wholly outside the window [86, 94]"
    (d / "verdicts.json").write_text(json.dumps(verdicts))
    page = reproduce_html.render(paperplans.PAPERS["000"], reproduce_html.read(d))
    rows = {r[0]: r for r in table(page, "references")}
    assert rows["000-t1-ns3-0ms"][10] == verdicts["checks"][0]["reason"]
    assert rows["000-t1-linux-0ms"][10] == ""


def test_rendering_again_draws_the_figures_from_metrics_parquet(tmp_path: Path) -> None:
    """`make papers-docs` redraws a committed reproduction's figures with the current
    figures code, from metrics.parquet alone (no results directory), then its report.html."""
    import base64

    from mprig.cli import main as cli

    def size(path: Path) -> tuple[int, int]:
        with Image.open(path) as image:
            return image.size

    d = write_fixture(tmp_path)
    assert size(d / FIGURE) == (40, 30)  # the fixture's placeholder
    assert cli.main(["reproduce", "--html", "--out", str(tmp_path)]) == 0
    assert size(d / FIGURE) == (576, 324)  # one panel: throughput
    assert sorted(p.name for p in (d / "figures").rglob("*.*")) == [
        "metrics_vs_axis0.png",
        "metrics_vs_axis0.svg",
    ]
    embedded = base64.b64encode((d / FIGURE).read_bytes()).decode("ascii")
    assert embedded in (d / "report.html").read_text()


def test_a_window_of_a_quantity_that_cannot_be_negative_is_shown_from_0() -> None:
    from reports.refspec import load_all

    c = {"id": "000-t3-70m-dsack-ooo-bo", "verdict": "uninformative", "paper": 106.0,
         "ours": 2044.5, "low": 988.53, "high": 3100.4, "n": 5,
         "window": [-1594.84, 1806.84]}  # fmt: skip
    row = reproduce_html.reference_row(c, load_all()["000-t3-70m-dsack-ooo-bo"])
    assert row["window"] == "[0,\u00a01\u202f810]"
    gain = {**c, "id": "000-t1-linux-500ms", "window": [-2.017, 48.017]}
    row = reproduce_html.reference_row(gain, load_all()["000-t1-linux-500ms"])
    assert row["window"] == "[-2.02,\u00a048]"  # a gain can be negative
