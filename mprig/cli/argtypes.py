"""Command-line number types with bounds: `--k 1e400`, `--bin nan` or a 5000-digit `--k`
are option errors (`argument --k: ...`, exit status 2) naming the range and why, never a
traceback or a run that uses them."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from mprig.errors import escape

MAX_DIGITS = 30  # longer numbers are refused before int() converts them


def bounded_int(low: int, high: int, why: str) -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high]."""

    def parse(text: str) -> int:
        shown = escape(text[:40])
        if len(text.strip()) > MAX_DIGITS:
            raise argparse.ArgumentTypeError(f"{shown}...: too long; {_range(low, high, why)}")
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a whole number: {shown!r}; {_range(low, high, why)}"
            ) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range; {_range(low, high, why)}")
        return value

    return parse


def bounded_float(low: float, high: float, why: str) -> Callable[[str], float]:
    """An argparse type: a finite number in [low, high]."""

    def parse(text: str) -> float:
        shown = escape(text[:40])
        try:
            value = float(text) if len(text.strip()) <= MAX_DIGITS else math.nan
        except ValueError:
            value = math.nan
        if not low <= value <= high:  # nan and inf fail this too
            raise argparse.ArgumentTypeError(
                f"{shown!r} is not a number in range; {_range(low, high, why)}"
            )
        return value

    return parse


def _range(low: float, high: float, why: str) -> str:
    return f"allowed: {low:g} to {high:g} ({why})"
