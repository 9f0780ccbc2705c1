"""Mahimahi traces (mprig/campaign/trace.py) and the committed ones (experiments/traces/): parsing,
binning into rates, the looped schedule, and the generator reproducing every file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mprig.campaign import trace

TRACES = Path(__file__).parents[2] / "experiments" / "traces"


def test_parse_and_mean() -> None:
    t = trace.parse("1\n1\n\n2\n4\n")
    assert (t.opportunities, t.period_ms) == ((1, 1, 2, 4), 4)
    assert t.mean_mbit == 4 * 12_000 / 4000  # 4 packets of 1500 B in 4 ms: 12 Mbit/s


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no timestamps"),
        ("3\n1\n", "line 2: 1 ms comes after 3 ms"),
        ("1\n-2\n", "line 2: '-2' is not a millisecond timestamp"),
        ("0\n", "the last timestamp (0 ms) must be > 0"),
        ("99999999999\n", "is not a millisecond timestamp"),
    ],
)
def test_parse_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        trace.parse(text)


def test_bins_and_a_looped_schedule_that_changes_only_beyond_the_resolution() -> None:
    # 100 ms bins: 1 Mbit/s is 8.33 packets per bin; 2 bins low, 2 bins high, period 400 ms
    low = [int(i * 12) for i in range(1, 17)]  # one packet each 12 ms: 1 Mbit/s
    high = [200 + i * 4 for i in range(1, 51)]  # one each 4 ms: 3 Mbit/s, ending at 400
    t = trace.parse("\n".join(map(str, [*low, *high])))
    assert [round(r, 2) for r in trace.bin_rates(t, 100)] == [0.96, 0.96, 3.0, 3.0]
    assert trace.schedule(t, 100, 1.0) == [(0.0, 0.96), (0.2, 3.0), (0.4, 0.96), (0.6, 3.0),
                                           (0.8, 0.96)]  # fmt: skip
    assert [c for c in trace.capacity(t, 100, 0.5)] == [(0.0, 0.96), (0.1, 0.96), (0.2, 3.0),
                                                       (0.3, 3.0), (0.4, 0.96)]  # fmt: skip


def test_an_empty_bin_gets_the_floor_rate_not_zero() -> None:
    t = trace.parse("1\n300\n")
    assert trace.schedule(t, 100, 0.3) == [(0.0, 0.12), (0.1, trace.MIN_RATE_MBIT),
                                           (0.2, 0.12)]  # fmt: skip


def test_the_generator_reproduces_the_committed_traces(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("gen", TRACES / "generate.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen.main(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(p.name for p in TRACES.glob("*.trace"))
    for name in names:
        assert (tmp_path / name).read_bytes() == (TRACES / name).read_bytes(), name
    alt = trace.load(str(TRACES / "alt-4-12.trace"))
    assert [round(r, 1) for r in trace.bin_rates(alt, 500)] == [4.0] * 4 + [12.0] * 4
