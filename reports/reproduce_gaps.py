"""What a paper's profile has not run yet: campaigns without results and planned runs with
no bundle. A core or full reproduction goes to reports/reproductions/, where docs/papers.md
takes its numbers from, so `mprig reproduce` refuses to write one over these gaps unless
asked for a partial one (`--partial`), which then says so in environment.json and report.md.
A full profile takes many sessions without KVM; its campaigns resume where they stopped.

`--min-n K` asks for less than every planned repetition but more than any part: every cell
(a variant at a sweep point) of every campaign holding at least K runs. The paper's 30
repetitions of paper 000 are then a sixth of the machine time away at K = 5 (`make
paper-shard ... SHARD=1/6` deals 5 repetitions of every cell, mprig/campaign/shard.py).
Each gap line says how many runs its cells hold, so the report and environment.json state
the n the verdicts stand on.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any, Protocol

from mprig.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from reports.results import Results


class Outcome(Protocol):
    """What gaps() reads of reports/reproduce.py's CampaignOutcome."""

    @property
    def stem(self) -> str: ...
    @property
    def profile(self) -> str: ...
    @property
    def results(self) -> Results | None: ...
    @property
    def missing(self) -> str: ...  # why there are no results


def cell_runs(results: Results) -> tuple[int, int, int]:
    """(fewest, most) complete runs that one planned cell (variant x sweep point) of RESULTS
    holds, and the most runs planned for one cell (the repetitions). A failed or rig-limited
    run is a result but gives no number, so it does not count towards a cell's n."""
    held = set(results.complete["run_id"])
    planned: Counter[tuple[str, str]] = Counter()
    present: Counter[tuple[str, str]] = Counter()
    for p in results.planned:
        cell = cell_key(p["variant"], p["point"])
        planned[cell] += 1
        present[cell] += p["run_id"] in held
    counts = [present[c] for c in planned] or [0]
    return min(counts), max(counts), max(planned.values(), default=0)


def cell_key(variant: str, point: dict[str, Any]) -> tuple[str, str]:
    """A cell of a plan: its variant at its sweep point (the point's values as JSON)."""
    return variant, json.dumps(point, sort_keys=True, default=str)


def cells(outcomes: Sequence[Outcome], papers_dir: Path) -> dict[str, int]:
    """environment.json's `cells` of a reproduction written without every planned run: the
    fewest runs any cell of the profile holds (0 when one of its campaigns has no results),
    and the most planned for one."""
    found = [cell_runs(o.results) for o in outcomes if o.results is not None]
    absent = any(o.results is None and _in_profile(o, papers_dir) for o in outcomes)
    fewest = 0 if absent else min((f for f, _, _ in found), default=0)
    return {"fewest": fewest, "planned": max((r for _, _, r in found), default=0)}


def label(profile: str, environment: dict[str, Any]) -> str:
    """The profile as docs/papers.md names a committed reproduction: 'full', or 'full, n >= 5
    of 30' for one written with --min-n, or 'full, partial' (--partial, or no `cells`)."""
    if not environment.get("incomplete"):
        return profile
    got = environment.get("cells") or {}
    if got.get("fewest", 0) > 0:
        return f"{profile}, n ≥ {got['fewest']} of {got['planned']}"
    return f"{profile}, partial"


def _in_profile(o: Outcome, papers_dir: Path) -> bool:
    """Whether the profile has campaign O (PAPERS_DIR/<stem>-<profile>.yaml exists)."""
    return (papers_dir / f"{o.stem}-{o.profile}.yaml").is_file()


def gaps(outcomes: Sequence[Outcome], papers_dir: Path, min_n: int | None = None) -> list[str]:
    """One line per campaign of the profile (a PAPERS_DIR/<stem>-<profile>.yaml exists) that
    is not complete: absent, or with planned runs that never ran (a failed run is a result,
    not a gap), with the runs its cells hold. With MIN_N, only the campaigns where a cell
    holds fewer than MIN_N runs."""
    out = []
    for o in outcomes:
        name = f"{o.stem}-{o.profile}"
        if not _in_profile(o, papers_dir):
            continue  # the profile has no such campaign
        if o.results is None:
            out.append(f"{name}: no results ({o.missing})")
        elif o.results.missing or min_n is not None:
            fewest, most, repetitions = cell_runs(o.results)
            if min_n is not None and fewest >= min_n:
                continue
            r, parts = o.results, []
            if r.missing:
                parts.append(f"{len(r.missing)} of {len(r.planned)} planned runs {unrun(r)}")
            if unused := len(r.runs) - len(r.complete):
                parts.append(f"{unused} failed or rig-limited")
            held = f"{fewest}" if fewest == most else f"{fewest}-{most}"
            out.append(
                f"{name}: {'; '.join(parts)} (a cell holds {held} complete runs of its "
                f"{repetitions})"
            )
    return out


def unrun(results: Results) -> str:
    """What a planned run without a bundle is: one that never ran, or, in an archive, one
    not archived yet (it may have run on a machine whose results were not archived)."""
    return "not archived yet" if results.archived else "never ran"


def refuse(
    paper: str,
    profile: str,
    outcomes: Sequence[Outcome],
    papers_dir: Path,
    where: str,
    min_n: int | None = None,
) -> None:
    """Raise when the profile has gaps() (with MIN_N: a cell holding fewer than MIN_N runs):
    the committed reproduction stays as it is."""
    found = gaps(outcomes, papers_dir, min_n)
    if not found:
        return
    if min_n is not None:
        raise UsageError(
            f"paper {paper}, {profile} profile, has cells with fewer than {min_n} runs: "
            f"{'; '.join(found)}. {where} keeps what it has. Run more of each campaign (`make "
            "paper-shard CAMPAIGN=experiments/papers/<campaign>.yaml SHARD=I/N` deals every "
            "cell's repetitions evenly over the N shards), or ask for fewer with --min-n"
        )
    if any(o.results is not None and o.results.archived for o in outcomes):
        resume = ("Run the missing shards with `make paper-shard CAMPAIGN=experiments/papers/"
                  "<campaign>.yaml SHARD=I/N`, which adds them to the archive")  # fmt: skip
    else:
        resume = (f"Resume with `mprig reproduce {paper} --profile {profile} --run` (each "
                  "campaign resumes where it stopped)")  # fmt: skip
    raise UsageError(
        f"paper {paper}, {profile} profile, is not complete: {'; '.join(found)}. {where} "
        f"keeps what it has. {resume}, or write a partial reproduction with --partial (it "
        "says what is missing)"
    )


def lines(found: list[str]) -> list[str]:
    """report.md's warning for a partial reproduction."""
    if not found:
        return []
    return ["**Partial reproduction:** " + "; ".join(found) + ".", ""]
