"""The report's environment shows the ss sampler's achieved interval (run.json
`capture.ss_interval`) over the campaign's runs, and whether each run started with the
kernel's TCP metrics cache flushed (run.json `hosts.<host>.flushed`)."""

from __future__ import annotations

from reports.report import flushed_text, ss_interval_text


def test_ss_interval_over_runs() -> None:
    captures = [
        {"ss_interval": {"configured_s": 0.1, "median_s": 0.1004, "p95_s": 0.1021, "samples": 50}},
        {"ss_interval": {"configured_s": 0.1, "median_s": 0.2113, "p95_s": 0.35, "samples": 24}},
        {"ss_interval": {"configured_s": 0.1, "median_s": None, "p95_s": None, "samples": 1}},
        {},  # a run recorded before the interval was
    ]
    assert ss_interval_text(captures) == (
        "median 0.100-0.211 s, p95 up to 0.350 s (configured 0.1 s, 2 runs)"
    )
    assert ss_interval_text([{}]) == ""


def test_flushed_over_runs() -> None:
    both = {"client": {"flushed": {"tcp_metrics": 2, "tcp_metrics_left": 0}},
            "server": {"flushed": {"tcp_metrics": 0, "tcp_metrics_left": 0}}}  # fmt: skip
    one = {"client": both["client"], "server": {"kernel": "6.1"}}  # only half flushed
    old = {"client": {"kernel": "6.1"}, "server": {"kernel": "6.1"}}
    assert flushed_text([{"hosts": both}, {"hosts": both}]) == "flushed before every run (2 runs)"
    assert flushed_text([{"hosts": both}, {"hosts": one}, {"hosts": old}, {}]) == (
        "flushed before 1 of 4 runs (the others made before mprig flushed it)"
    )
    assert flushed_text([{"hosts": old}]) == "not flushed (1 run made before mprig flushed it)"
    assert flushed_text([]) == ""
