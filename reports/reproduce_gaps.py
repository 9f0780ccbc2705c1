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
            missing = len(o.results.missing)
            out.append(f"{name}: {missing} of {planned} planned runs {unrun(o.results)}")
    return out


def unrun(results: Results) -> str:
    """What a planned run without a bundle is: one that never ran, or, in an archive, one
    not archived yet (it may have run on a machine whose results were not archived)."""
    return "not archived yet" if results.archived else "never ran"


def refuse(
    paper: str, profile: str, outcomes: Sequence[Outcome], papers_dir: Path, where: str
) -> None:
    """Raise when the profile has gaps(): the committed reproduction stays as it is."""
    found = gaps(outcomes, papers_dir)
    if not found:
        return
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
