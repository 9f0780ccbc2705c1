"""The report's environment shows the ss sampler's achieved interval (run.json
`capture.ss_interval`) over the campaign's runs."""

from __future__ import annotations

from reports.report import ss_interval_text


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
