"""The HTML reports in a real headless Chromium: a campaign's (`mprig report`) and a paper
reproduction's (`mprig reproduce`, rendered from the committed reports/reproductions/000).
Expected tables present, every embedded figure decodes (the report's own script marks each
<img> loaded or broken), no value wraps inside a table cell, a screenshot of each."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from html import unescape
from pathlib import Path

import pytest
import report_synth as rs

from reports import paperplans, report, reproduce_html, results

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TABLES = (
    "references",
    "missing",
    "failed",
    "warnings",
    "summary",
    "instruments",
    "paper",
    "pivot_throughput_bps",
    "runs",
    "glossary",
    "environment",
)
REPRODUCTION_TABLES = (  # 000's full profile: no row "not comparable", so no such table
    "campaigns",
    "orderings",
    "references",
    "comparison-0",
    "comparison-1",
    "comparison-2",
    "comparison-3",
    "environment",
    "verdict-terms",
    "glossary",
)
SEED = "000"  # the committed reproduction the browser opens

# Appended to a copy of the page: after load, writes what the browser laid out into
# <pre id="probe"> as JSON, which --dump-dom returns. A cell's text wraps when the line
# boxes of its contents sit at more than one height; value cells (not class "text") and
# values inside prose (class "v") must stay on one line.
PROBE = """<script>
window.addEventListener("load", function () {
  function lines(el) {
    var r = document.createRange(); r.selectNodeContents(el);
    var tops = [];
    Array.prototype.forEach.call(r.getClientRects(), function (b) {
      if (b.width > 0 && !tops.some(function (t) { return Math.abs(t - b.top) < b.height / 2; })) {
        tops.push(b.top);
      }
    });
    return tops.length;
  }
  var wrapped = [];
  document.querySelectorAll("td:not(.text), td .v").forEach(function (el) {
    if (lines(el) > 1) { wrapped.push(el.textContent); }
  });
  var probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({
    wrapped: wrapped,
    images: Array.prototype.map.call(document.images, function (i) { return i.naturalWidth; }),
    tables: Array.prototype.map.call(document.querySelectorAll("table[id]"), function (t) {
      return t.id;
    })
  });
  document.body.appendChild(probe);
});
</script>"""


def chromium(tmp: Path, *args: str) -> str:
    # A skip would pass `make test` without looking at a page: make setup installs it.
    assert Path(CHROMIUM).exists(), "chromium not installed: `make setup` (APT_PACKAGES)"
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp / 'profile'}",
        "--virtual-time-budget=5000",
        *args,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def probe(tmp: Path, page: Path) -> dict:
    """What Chromium laid out for PAGE: wrapped value cells, image widths, table ids."""
    probed = tmp / f"probed-{page.name}"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = chromium(tmp, "--dump-dom", probed.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe script did not run"
    return dict(json.loads(unescape(found.group(1))))


def screenshot(tmp: Path, page: Path) -> bytes:
    shot = tmp / f"{page.stem}.png"
    chromium(tmp, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    return shot.read_bytes()


@pytest.fixture(scope="module")
def reproduction(tmp_path_factory: pytest.TempPathFactory) -> Path:
    committed = paperplans.REPRODUCTIONS / SEED
    page = tmp_path_factory.mktemp("reproduction") / "report.html"
    text = reproduce_html.render(paperplans.PAPERS[SEED], reproduce_html.read(committed))
    page.write_text(text)
    return page


@pytest.fixture(scope="module")
def html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser") / "synth"
    s = rs.Synth(
        references=("000-t3-50m-*",),
        failed=("dsack-d10-r2",),
        dropped=("nopr-d50-r5",),
        flags={"nopr-d10-r1": ["impairment_deviation"]},
    )
    written = report.write_report(results.load(rs.write(root, s)), root / "report", ["html"])
    return written["html"]


def test_dom_has_the_tables_and_no_broken_image(html: Path, tmp_path: Path) -> None:
    dom = chromium(tmp_path, "--dump-dom", html.as_uri())
    assert re.search(r'<body[^>]*data-images-broken="0"', dom), "the load script did not run"
    states = re.findall(r'<img [^>]*data-loaded="(\w+)"', dom)
    assert states == ["yes"] * 9  # 1 axis + box + scatter + 2 CDFs + 4 time series
    present = [t for t in TABLES if f'id="table-{t}"' in dom]
    assert present == list(TABLES)
    assert "nopr-d50-r5" in dom and "iperf3 on client: connection refused" in dom


def test_a_broken_figure_is_detected(html: Path, tmp_path: Path) -> None:
    page = html.read_text()
    first = page.index("data:image/png;base64,") + len("data:image/png;base64,")
    broken = tmp_path / "broken.html"
    broken.write_text(page[:first] + "AAAA" + page[first + 64 :])
    dom = chromium(tmp_path, "--dump-dom", broken.as_uri())
    assert re.findall(r'<img [^>]*data-loaded="(\w+)"', dom) == ["broken"] + ["yes"] * 8
    assert re.search(r'<body[^>]*data-images-broken="1"', dom)


def test_no_value_wraps_in_the_campaign_report(html: Path, tmp_path: Path) -> None:
    seen = probe(tmp_path, html)
    assert seen["wrapped"] == []
    assert len(seen["images"]) == 9 and min(seen["images"]) > 0


def test_reproduction_report_in_the_browser(reproduction: Path, tmp_path: Path) -> None:
    seen = probe(tmp_path, reproduction)
    figures = sorted((paperplans.REPRODUCTIONS / SEED / "figures").rglob("*.png"))
    assert len(seen["images"]) == len(figures) == 3  # Table I, scenarios 1 and 2 by their axis
    assert min(seen["images"]) > 0
    assert [t.removeprefix("table-") for t in seen["tables"]] == list(REPRODUCTION_TABLES)
    assert seen["wrapped"] == []
    dom = chromium(tmp_path, "--dump-dom", reproduction.as_uri())
    assert re.search(r'<body[^>]*data-images-broken="0"', dom), "the load script did not run"


@pytest.mark.parametrize("which", ["html", "reproduction"])
def test_screenshot(which: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    head = screenshot(tmp_path, request.getfixturevalue(which))[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (1280, 2000)
