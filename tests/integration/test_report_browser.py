"""The HTML report in a real headless Chromium: expected tables present, every embedded
figure decodes (the report's own script marks each <img> loaded or broken), a screenshot."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
import report_synth as rs

from reports import report, results

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

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="chromium not installed (make setup installs it)"
)


def chromium(tmp: Path, *args: str) -> str:
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


def test_screenshot(html: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", html.as_uri())
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (1280, 2000)
