"""What a paper's profile has not run yet: campaigns without results and planned runs with
no bundle. A core or full reproduction goes to reports/reproductions/, where docs/papers.md
takes its numbers from, so `mprig reproduce` refuses to write one over these gaps unless
asked for a partial one (`--partial`), which then says so in environment.json and report.md.
A full profile takes many sessions without KVM; its campaigns resume where they stopped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

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


def gaps(outcomes: Sequence[Outcome], papers_dir: Path) -> list[str]:
    """One line per campaign of the profile (a PAPERS_DIR/<stem>-<profile>.yaml exists) that
    is not complete: absent, or with planned runs that never ran (a failed run is a result,
    not a gap)."""
    out = []
    for o in outcomes:
        name = f"{o.stem}-{o.profile}"
        if not (papers_dir / f"{name}.yaml").is_file():
            continue  # the profile has no such campaign
        if o.results is None:
            out.append(f"{name}: no results ({o.missing})")
        elif o.results.missing:
            planned = len(o.results.planned)
            out.append(f"{name}: {len(o.results.missing)} of {planned} planned runs never ran")
    return out


def refuse(paper: str, profile: str, found: list[str], where: str) -> None:
    """Raise when FOUND (gaps()) is not empty: the committed reproduction stays as it is."""
    if found:
        raise UsageError(
            f"paper {paper}, {profile} profile, is not complete: {'; '.join(found)}. "
            f"{where} keeps what it has. Resume with `mprig reproduce {paper} --profile "
            f"{profile} --run` (each campaign resumes where it stopped), or write a partial "
            "reproduction with --partial (it says what is missing)"
        )


def lines(found: list[str]) -> list[str]:
    """report.md's warning for a partial reproduction."""
    if not found:
        return []
    return ["**Partial reproduction:** " + "; ".join(found) + ".", ""]
