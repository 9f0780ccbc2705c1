"""mprig/campaign/wifi.py against the committed ns-3 sweeps (issue 16 part 2; no ns-3 needed here).

Goodput within 10 % and delivery ratio within 2 points at every distance of every sweep,
unless docs/wifi-model.md names the disagreement with a bound: then that bound is asserted,
so the test still fails if the disagreement grows, and a bound no point needs is stale.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from mprig.campaign import wifi, wifi_ns3

DOC = Path(__file__).resolve().parents[2] / "docs" / "wifi-model.md"

SMALL_SWEEP = """\
# oracle/ns3/build/wifi_link --standard=11b --rate=2 --exponent=2.2 --distances=10 --runs=2
# ns-3 3.37-2
standard,manager,rate_mbit,distance_m,run,goodput_mbit,pdr,retries_per_mpdu,mpdus,dropped,mean_phy_rate_mbit,ack_pdr,ack_retries_per_mpdu,ack_mpdus
11b,constant,2,10,1,1.5,1,0.1,600,0,2,1,0.1,600
11b,constant,2,10,2,1.3,0.99,0.2,590,6,2,1,0.1,590
"""


@dataclass(frozen=True)
class Bound:
    """One row of docs/wifi-model.md's table of named disagreements."""

    stem: str  # the sweep
    low_m: float  # first distance covered
    high_m: float  # last distance covered
    goodput: float  # |model - ns-3| / ns-3 at most
    delivery: float  # |model - ns-3| at most (ratio, 0..1)

    def covers(self, point: wifi_ns3.Point) -> bool:
        return point.stem == self.stem and self.low_m <= point.distance_m <= self.high_m


def documented_bounds(text: str) -> list[Bound]:
    """The rows between `<!-- ns3-bounds -->` and `<!-- /ns3-bounds -->`."""
    block = text.split("<!-- ns3-bounds -->")[1].split("<!-- /ns3-bounds -->")[0]
    bounds = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not re.fullmatch(r"[\d.]+(-[\d.]+)?", cells[1]):
            continue
        low, _, high = cells[1].partition("-")
        goodput = float(cells[2].rstrip(" %")) / 100.0
        delivery = float(cells[3].removesuffix("pts").strip()) / 100.0
        bounds.append(Bound(cells[0], float(low), float(high or low), goodput, delivery))
    return bounds


def allowed(point: wifi_ns3.Point, bounds: list[Bound]) -> tuple[float, float]:
    """(goodput, delivery) tolerance at `point`: the documented bound, else the default."""
    for bound in bounds:
        if bound.covers(point):
            return bound.goodput, bound.delivery
    return wifi_ns3.GOODPUT_TOLERANCE, wifi_ns3.DELIVERY_TOLERANCE


@pytest.fixture(scope="module")
def points() -> list[wifi_ns3.Point]:
    return wifi_ns3.all_points()


def test_parse_sweep_reads_command_version_and_rows() -> None:
    sweep = wifi_ns3.parse_sweep("paper003-11b-2", SMALL_SWEEP)
    assert (sweep.args, sweep.version, len(sweep.rows)) == (
        {"standard": "11b", "rate": "2", "exponent": "2.2", "distances": "10", "runs": "2"},
        "3.37-2",
        2,
    )
    [point] = wifi_ns3.compare(sweep, wifi.PAPER003)
    assert (point.n, round(point.ns3_goodput_mbit, 3), round(point.ns3_delivery, 3)) == (
        2,
        1.4,
        0.995,
    )


def test_sweep_of_another_calibration_is_refused() -> None:
    sweep = wifi_ns3.parse_sweep("paper003-11b-2", SMALL_SWEEP)
    with pytest.raises(ValueError, match=r"ran n = 2.2.*n = 2.06.*make ns3-oracle"):
        wifi_ns3.compare(sweep, wifi.PAPER000)


def test_every_sweep_ran_its_calibration_at_ten_distances() -> None:
    for stem, sweep in wifi_ns3.load_sweeps().items():
        wifi_ns3.check_calibration(sweep, wifi.radio_for(wifi_ns3.SWEEPS[stem]))
        distances = sorted({float(r["distance_m"]) for r in sweep.rows})
        assert (stem, distances) == (stem, [10.0 * k for k in range(1, 11)])


def test_model_within_tolerance_or_documented_bound(points: list[wifi_ns3.Point]) -> None:
    bounds = documented_bounds(DOC.read_text(encoding="utf-8"))
    outside = []
    for p in points:
        goodput, delivery = allowed(p, bounds)
        if abs(p.goodput_error) > goodput or abs(p.delivery_error) > delivery:
            outside.append(
                (p.stem, p.distance_m, round(p.goodput_error, 3), round(p.delivery_error, 4))
            )
    assert outside == []


def test_every_documented_bound_is_needed(points: list[wifi_ns3.Point]) -> None:
    """A bound whose points all agree within the default tolerance is stale: remove it."""
    stale = []
    for bound in documented_bounds(DOC.read_text(encoding="utf-8")):
        covered = [p for p in points if bound.covers(p)]
        needed = [
            p
            for p in covered
            if abs(p.goodput_error) > wifi_ns3.GOODPUT_TOLERANCE
            or abs(p.delivery_error) > wifi_ns3.DELIVERY_TOLERANCE
        ]
        if not needed:
            stale.append((bound.stem, bound.low_m, bound.high_m, len(covered)))
    assert stale == []


def test_doc_table_is_the_committed_comparison(points: list[wifi_ns3.Point]) -> None:
    assert wifi_ns3.markdown_table(points) in DOC.read_text(encoding="utf-8")


def test_goodput_error_is_relative_to_ns3() -> None:
    sweep = wifi_ns3.parse_sweep("paper003-11b-2", SMALL_SWEEP)
    [point] = wifi_ns3.compare(sweep, wifi.PAPER003)
    assert math.isclose(point.goodput_error, (point.model_goodput_mbit - 1.4) / 1.4)
