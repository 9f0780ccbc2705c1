"""engine: ns3 paths (issue 16 parts 3-4): the spec key, the engine's command line, its
summary line, the real-time verdict and the rig's link type. No root, no ns-3 needed."""

from __future__ import annotations

import pytest

from mprig.errors import SpecError
from mprig.spec import parse_campaign

NS3_PATH = """\
name: t
paths:
  - name: wifi
    kind: wifi
    engine: ns3
    distance_m: 30
    rate_mbit: 54
variants:
  - name: mptcp
"""


def spec_error(text: str) -> tuple[int | None, str, str]:
    with pytest.raises(SpecError) as exc:
        parse_campaign(text, "t.yaml")
    e = exc.value
    return e.line, e.field, e.message


def test_engine_defaults_to_netem() -> None:
    c = parse_campaign(NS3_PATH.replace("    engine: ns3\n", ""), "t.yaml")
    assert c.paths[0].engine == "netem"


def test_engine_ns3_on_a_wifi_path_with_distance() -> None:
    assert parse_campaign(NS3_PATH, "t.yaml").paths[0].engine == "ns3"


def test_unknown_engine_is_refused_at_its_line() -> None:
    line, field, message = spec_error(NS3_PATH.replace("engine: ns3", "engine: ns2"))
    assert (line, field) == (5, "paths.wifi.engine")
    assert "'netem'" in message and "'ns3'" in message


def test_engine_ns3_needs_distance() -> None:
    line, field, message = spec_error(NS3_PATH.replace("    distance_m: 30\n", ""))
    assert (line, field) == (5, "paths.wifi.engine")
    assert "distance_m" in message and "engine: netem" in message


def test_engine_ns3_needs_a_wifi_path() -> None:
    text = NS3_PATH.replace("kind: wifi", "kind: cellular").replace("    distance_m: 30\n", "")
    line, field, message = spec_error(text)
    assert (line, field) == (5, "paths.wifi.engine")
    assert "kind: wifi" in message


def test_engine_ns3_refuses_netem_impairments() -> None:
    text = NS3_PATH.replace("rate_mbit: 54\n", "rate_mbit: 54\n    delay_ms: 5\n")
    line, field, message = spec_error(text)
    assert (line, field) == (5, "paths.wifi.engine")
    assert "delay_ms" in message
