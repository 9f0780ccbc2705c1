"""mprig/campaign/wifi.py against the ns-3 oracle (issue 16 part 2): read the committed sweeps of
oracle/ns3/wifi_link (reports/references/ns3/*.csv) and compare the model with them.

Each CSV starts with `# <the command that made it>` and `# ns-3 <version>`, then one row per
distance and repetition. Pure functions over the file's text; `load_sweeps` is the I/O edge.
`python -m mprig.campaign.wifi_ns3` prints the comparison table that docs/wifi-model.md carries.
"""

from __future__ import annotations

import csv
import io
import math
import shlex
import statistics
from dataclasses import dataclass
from pathlib import Path

from mprig.campaign import wifi, wifi_phy

ORACLE_DIR = Path(__file__).resolve().parents[2] / "reports" / "references" / "ns3"

SWEEPS: dict[str, str] = {
    # CSV stem -> the calibration of mprig/campaign/wifi.py it checks
    "paper000-11g-54": "paper000",
    "paper003-11g-54": "paper003",
    "paper003-11g-6": "paper003",
    "paper003-11b-2": "paper003",
    "paper003-11g-54-nopd": "paper003",
    "paper003-11g-6-nopd": "paper003",
    "paper003-11b-2-nopd": "paper003",
    "ideal-11g": "ns3-default",
}
"""Sweeps compared with the model. minstrel-11g.csv is committed for reference only: the
model has no Minstrel (its adaptive rate is ns-3's Ideal manager)."""

GOODPUT_TOLERANCE = 0.10  # relative to ns-3's goodput (issue 16 part 2)
DELIVERY_TOLERANCE = 0.02  # absolute: 2 points of delivery ratio


@dataclass(frozen=True)
class Sweep:
    """One committed ns-3 sweep."""

    stem: str  # file name without .csv
    args: dict[str, str]  # the program's --key=value arguments, from the command line
    version: str  # ns-3 package version
    rows: tuple[dict[str, str], ...]  # CSV rows, one per distance and repetition


@dataclass(frozen=True)
class Point:
    """The model and ns-3 at one distance of one sweep."""

    stem: str  # the sweep
    distance_m: float
    n: int  # ns-3 repetitions averaged
    ns3_goodput_mbit: float  # mean TCP goodput over the repetitions
    ns3_goodput_sd: float  # its sample standard deviation
    ns3_delivery: float  # MAC delivery ratio of the data MPDUs, pooled over repetitions
    ns3_retries: float  # failed attempts per data MPDU, pooled
    ns3_phy_rate_mbit: float  # PHY rate of the data frames, pooled
    model_goodput_mbit: float
    model_delivery: float
    model_phy_rate_mbit: float

    @property
    def goodput_error(self) -> float:
        """Model minus ns-3, relative to ns-3 (inf when ns-3 delivered nothing)."""
        if self.ns3_goodput_mbit == 0:
            return 0.0 if self.model_goodput_mbit == 0 else math.inf
        return (self.model_goodput_mbit - self.ns3_goodput_mbit) / self.ns3_goodput_mbit

    @property
    def delivery_error(self) -> float:
        """Model minus ns-3, in delivery ratio (0..1)."""
        return self.model_delivery - self.ns3_delivery


def parse_sweep(stem: str, text: str) -> Sweep:
    """A sweep from the CSV text oracle/ns3/wifi_link wrote under `make ns3-oracle`."""
    comments = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("#")]
    if len(comments) < 2 or not comments[1].startswith("ns-3 "):
        raise ValueError(f"{stem}.csv: expected '# <command>' and '# ns-3 <version>' first")
    args = {}
    for word in shlex.split(comments[0])[1:]:
        key, _, value = word.removeprefix("--").partition("=")
        args[key] = value
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    rows = tuple(csv.DictReader(io.StringIO(body)))
    return Sweep(stem, args, comments[1].removeprefix("ns-3 "), rows)


def check_calibration(sweep: Sweep, radio: wifi.Radio) -> None:
    """ValueError unless the sweep ran the radio's path loss (else `make ns3-oracle`)."""
    exponent = float(sweep.args.get("exponent", "2.2"))
    reference = float(sweep.args.get("referenceLoss", "46.6777"))
    if not (
        math.isclose(exponent, radio.exponent) and math.isclose(reference, radio.reference_loss_db)
    ):
        raise ValueError(
            f"{sweep.stem}.csv ran n = {exponent}, PL(1 m) = {reference} dB; the model's "
            f"calibration has n = {radio.exponent}, {radio.reference_loss_db} dB: "
            "re-run `make ns3-oracle`"
        )


def _model_rate(sweep: Sweep) -> float | None:
    if sweep.args.get("manager", "constant") == "constant":
        return float(sweep.args.get("rate", "54"))
    return None


def _pooled(rows: list[dict[str, str]], key: str) -> float:
    """A per-MPDU figure over all repetitions: each run weighted by its data MPDUs (a run
    whose TCP sent nothing in the window prints 0 and carries no weight)."""
    weights = [float(r["mpdus"]) for r in rows]
    if sum(weights) == 0:
        return 0.0
    return sum(w * float(r[key]) for w, r in zip(weights, rows, strict=True)) / sum(weights)


def compare(sweep: Sweep, radio: wifi.Radio) -> list[Point]:
    """The model against `sweep` at each of its distances (repetitions averaged)."""
    check_calibration(sweep, radio)
    standard: wifi_phy.Standard = "11b" if sweep.args.get("standard") == "11b" else "11g"
    by_distance: dict[float, list[dict[str, str]]] = {}
    for row in sweep.rows:
        by_distance.setdefault(float(row["distance_m"]), []).append(row)
    points = []
    for d, rows in sorted(by_distance.items()):
        goodput = [float(r["goodput_mbit"]) for r in rows]
        est = wifi.link(d, standard, _model_rate(sweep), radio)
        points.append(
            Point(
                stem=sweep.stem,
                distance_m=d,
                n=len(rows),
                ns3_goodput_mbit=statistics.fmean(goodput),
                ns3_goodput_sd=statistics.stdev(goodput) if len(goodput) > 1 else 0.0,
                ns3_delivery=_pooled(rows, "pdr"),
                ns3_retries=_pooled(rows, "retries_per_mpdu"),
                ns3_phy_rate_mbit=_pooled(rows, "mean_phy_rate_mbit"),
                model_goodput_mbit=est.goodput_mbit,
                model_delivery=1.0 - est.loss_pct / 100.0,
                model_phy_rate_mbit=est.phy_rate_mbit,
            )
        )
    return points


def load_sweeps(directory: Path = ORACLE_DIR) -> dict[str, Sweep]:
    """Every committed sweep named in SWEEPS, read from `directory`."""
    return {
        stem: parse_sweep(stem, (directory / f"{stem}.csv").read_text(encoding="utf-8"))
        for stem in SWEEPS
    }


def all_points(directory: Path = ORACLE_DIR) -> list[Point]:
    """The comparison of every sweep in SWEEPS with its calibration."""
    points = []
    for stem, sweep in load_sweeps(directory).items():
        points.extend(compare(sweep, wifi.radio_for(SWEEPS[stem])))
    return points


def markdown_table(points: list[Point]) -> str:
    """The comparison as the Markdown table docs/wifi-model.md carries."""
    lines = [
        "| sweep | d (m) | ns-3 goodput Mbit/s (sd, n) | model | error | ns-3 delivery "
        "| model | error (pts) | ns-3 retries/MPDU | PHY rate ns-3 / model |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        lines.append(
            f"| {p.stem} | {p.distance_m:g} | {p.ns3_goodput_mbit:.2f} ({p.ns3_goodput_sd:.2f}, "
            f"{p.n}) | {p.model_goodput_mbit:.2f} | {100 * p.goodput_error:+.1f} % "
            f"| {p.ns3_delivery:.4f} | {p.model_delivery:.4f} | {100 * p.delivery_error:+.2f} "
            f"| {p.ns3_retries:.2f} | {p.ns3_phy_rate_mbit:.1f} / {p.model_phy_rate_mbit:g} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table(all_points()))
