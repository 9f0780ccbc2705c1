"""The digest of the papers (PAPERS.md) and the sentences of their texts that reference rows
quote, for tests that re-read each reference against its words.

The workspace keeps them in ../shared beside the checkout; a clone elsewhere (CI) has
neither, so the repository carries a copy under tests/digest/ and the tests read the
shared originals when present, the copy otherwise: they never skip. test_references_digest
checks that the copy is still the original wherever the original is there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
COPY = Path(__file__).resolve().parent / "digest"


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def digest_path() -> Path:
    original = SHARED / "PAPERS.md"
    return original if original.is_file() else COPY / "PAPERS.md"


def digest() -> str:
    return digest_path().read_text()


def section(paper: str) -> str:
    """The digest's section of PAPER ("000".."004"), whitespace runs made one space."""
    parts = re.split(r"^## ", digest(), flags=re.M)
    return flat(next(p for p in parts if p[:3] == paper))


def copied_seed_quotes() -> dict[str, list[str]]:
    """tests/digest/seed-quotes.txt: paper -> the sentences copied from its text."""
    out: dict[str, list[str]] = {}
    for line in (COPY / "seed-quotes.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            paper, sentence = line.split(": ", 1)
            out.setdefault(paper, []).append(sentence)
    return out


def seed(paper: str) -> str | None:
    """The paper's own text from ../shared/seeds, whitespace runs made one space; None
    where the checkout has no ../shared."""
    found = sorted(SHARED.glob(f"seeds/{paper}_*.txt"))
    return flat(found[0].read_text()) if found else None


def seed_or_quotes(paper: str) -> str:
    """The paper's text, or (without ../shared) the sentences of it the repository copied."""
    text = seed(paper)
    return text if text is not None else " ".join(copied_seed_quotes().get(paper, []))
