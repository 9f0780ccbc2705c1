"""Campaign spec: loading, path shorthand, sweep axes, cross-references, error locations."""

from __future__ import annotations

from pathlib import Path as FsPath

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mprig.campaign.spec import (
    Axis,
    Campaign,
    Direction,
    Path,
    Traffic,
    Variant,
    apply_point,
    axis_values,
    load_campaign,
    parse_axis,
    parse_campaign,
    sweep_points,
)
from mprig.campaign.spec_models import Range
from mprig.errors import SpecError

REPO = FsPath(__file__).parents[2]

BASE = """\
name: t
paths:
  - name: wifi
    kind: wifi
    rate_mbit: 20
    delay_ms: 10
  - name: cell
    kind: cellular
    rate_mbit: 10
    delay_ms: 40
variants:
  - name: mptcp
  - name: tcp_wifi
    protocol: tcp
    path: wifi
"""


def campaign(extra: str = "") -> Campaign:
    return parse_campaign(BASE + extra, "t.yaml")


def spec_error(text: str) -> tuple[str, int | None, str, str]:
    with pytest.raises(SpecError) as exc:
        parse_campaign(text, "t.yaml")
    e = exc.value
    return e.file, e.line, e.field, e.message


def test_smoke_campaign() -> None:
    c = load_campaign(REPO / "experiments" / "smoke.yaml")
    wifi, cell = (
        Direction(rate_mbit=20, delay_ms=10, limit_pkts=100),
        Direction(rate_mbit=10, delay_ms=40, limit_pkts=150),
    )
    assert c.paths == (
        Path(name="wifi", kind="wifi", down=wifi, up=wifi),
        Path(name="cell", kind="cellular", down=cell, up=cell),
    )
    assert c.variants == (
        Variant(name="mptcp"),
        Variant(name="tcp_wifi", protocol="tcp", path="wifi"),
        Variant(name="tcp_cell", protocol="tcp", path="cell"),
    )
    assert (c.name, c.repetitions, c.traffic, c.capture.enabled, c.sweep) == (
        "smoke",
        2,
        Traffic(tool="iperf3", direction="download", duration_s=5),
        True,
        None,
    )


def test_nightly_campaign() -> None:
    c = load_campaign(REPO / "experiments" / "nightly.yaml")
    assert ([v.name for v in c.variants], c.repetitions, c.traffic.duration_s) == (
        ["mptcp", "tcp_wifi"],
        3,
        5,
    )


def test_path_shorthand_with_direction_override() -> None:
    p = Path.model_validate(
        {"name": "w", "kind": "wifi", "rate_mbit": 20, "delay_ms": 10, "down": {"rate_mbit": 30}}
    )
    assert (p.down, p.up) == (
        Direction(rate_mbit=30, delay_ms=10),
        Direction(rate_mbit=20, delay_ms=10),
    )


def test_sysctl_values_become_strings() -> None:
    v = Variant(name="m", sysctls={"net.ipv4.tcp_dsack": 0, "net.ipv4.tcp_frto": True})  # type: ignore[dict-item]
    assert v.sysctls == {"net.ipv4.tcp_dsack": "0", "net.ipv4.tcp_frto": "1"}


@pytest.mark.parametrize(
    "sysctls",
    [{"kernel.core_pattern": "x"}, {"net.ipv4.x": "1; reboot"}, {"net.ipv4.x": "$(id)"}],
)
def test_unsafe_sysctls_are_refused(sysctls: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        Variant(name="m", sysctls=sysctls)


def test_models_built_in_code_check_cross_references() -> None:
    wifi = Path(name="wifi", kind="wifi", down=Direction(rate_mbit=1), up=Direction(rate_mbit=1))
    with pytest.raises(ValidationError, match="no path named 'cell'"):
        Campaign(
            name="x", paths=(wifi,), variants=(Variant(name="t", protocol="tcp", path="cell"),)
        )


@pytest.mark.parametrize(
    ("key", "axis"),
    [
        ("paths.wifi.delay_ms", Axis("paths", "wifi", None, "delay_ms")),
        ("paths.cell.up.loss_pct", Axis("paths", "cell", "up", "loss_pct")),
        ("paths.wifi.distance_m", Axis("paths", "wifi", None, "distance_m")),
        ("variants.cc", Axis("variants", None, None, "cc")),
        ("variants.mptcp.scheduler", Axis("variants", "mptcp", None, "scheduler")),
        (
            "variants.sysctls.net.ipv4.tcp_dsack",
            Axis("variants", None, None, "sysctls", "net.ipv4.tcp_dsack"),
        ),
        ("traffic.duration_s", Axis("traffic", None, None, "duration_s")),
    ],
)
def test_parse_axis(key: str, axis: Axis) -> None:
    assert parse_axis(key, campaign()) == axis


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("repetitions", "cannot sweep 'repetitions'"),
        ("paths.lte.delay_ms", "no path named 'lte'; paths: wifi, cell"),
        ("paths.wifi.name", "unknown path field 'name'"),
        ("variants.name", "unknown variant field 'name'"),
        ("variants.nope.cc", "no variant named 'nope'; variants: mptcp, tcp_wifi"),
        ("traffic.speed", "unknown traffic field 'speed'"),
    ],
)
def test_parse_axis_refuses(key: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_axis(key, campaign())


def test_range_is_inclusive_and_rounded() -> None:
    assert axis_values(Range(start=0, stop=1, step=0.1)) == (
        0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1,
    )  # fmt: skip
    assert axis_values(Range(start=10, stop=40, step=15)) == (10, 25, 40)
    assert axis_values(Range(start=1, stop=2, step=5)) == (1,)


def test_sweep_points_cartesian_and_zip() -> None:
    cart = campaign(
        "sweep:\n  axes:\n    paths.wifi.delay_ms: [1, 2]\n    variants.cc: [cubic, reno]\n"
    )
    assert sweep_points(cart.sweep) == [
        {"paths.wifi.delay_ms": 1, "variants.cc": "cubic"},
        {"paths.wifi.delay_ms": 1, "variants.cc": "reno"},
        {"paths.wifi.delay_ms": 2, "variants.cc": "cubic"},
        {"paths.wifi.delay_ms": 2, "variants.cc": "reno"},
    ]
    zipped = campaign(
        "sweep:\n  mode: zip\n  axes:\n    paths.wifi.delay_ms: [1, 2]\n"
        "    paths.cell.delay_ms: {start: 10, stop: 20, step: 10}\n"
    )
    assert sweep_points(zipped.sweep) == [
        {"paths.wifi.delay_ms": 1, "paths.cell.delay_ms": 10},
        {"paths.wifi.delay_ms": 2, "paths.cell.delay_ms": 20},
    ]
    assert sweep_points(None) == [{}]


def test_apply_point_sets_the_named_fields_only() -> None:
    c = campaign()
    applied = apply_point(
        c,
        {
            "paths.wifi.delay_ms": 5,
            "paths.cell.up.rate_mbit": 2,
            "variants.cc": "reno",
            "variants.mptcp.scheduler": "redundant",
            "variants.tcp_wifi.sysctls.net.ipv4.tcp_frto": 0,
            "traffic.duration_s": 3,
        },
    )
    wifi, cell = applied.paths
    assert (wifi.down.delay_ms, wifi.up.delay_ms, cell.down.rate_mbit, cell.up.rate_mbit) == (
        5,
        5,
        10,
        2,
    )
    assert applied.variants == (
        Variant(name="mptcp", cc="reno", scheduler="redundant"),
        Variant(
            name="tcp_wifi", protocol="tcp", path="wifi", cc="reno",
            sysctls={"net.ipv4.tcp_frto": "0"},
        ),
    )  # fmt: skip
    assert applied.traffic == Traffic(duration_s=3)
    assert c.paths[0].down.delay_ms == 10  # the original is untouched


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (BASE.replace("delay_ms: 10", "delay_ms: 10\n    down: {delay_ms: -1}"),
         ("t.yaml", 7, "paths.wifi.down.delay_ms")),
        (BASE.replace("rate_mbit: 10", "rate_mbit: 10\n    down: {}\n    up: {rate_mbit: 0}"),
         ("t.yaml", 11, "paths.cell.up.rate_mbit")),
        (BASE + "capture: {snaplen: 10}\n", ("t.yaml", 16, "capture.snaplen")),
        (BASE + "traffic: {tool: bulk}\n", ("t.yaml", 16, "traffic.bytes")),
        (BASE + "capture:\n  hosts: []\n", ("t.yaml", 17, "capture.hosts")),
        (BASE.replace("- name: mptcp", "- name: mptcp\n    paths: [wifi, lte]"),
         ("t.yaml", 13, "variants.mptcp.paths")),
        (BASE.replace("- name: cell", "- name: 9cell"), ("t.yaml", 7, "paths[1].name")),
        (BASE.replace("delay_ms: 10", "delay_ms: 10\n    down: {delay_ms: 0, reorder_pct: 5}"),
         ("t.yaml", 7, "paths.wifi.down.reorder_pct")),
    ],
)  # fmt: skip
def test_error_locations(text: str, where: tuple[str, int, str]) -> None:
    assert spec_error(text)[:3] == where


def test_error_message_names_the_allowed_range() -> None:
    assert spec_error(BASE + "capture: {snaplen: 10}\n")[3] == (
        "must be greater than or equal to 140, got 10 (allowed: >= 140 and <= 262144: Linux"
        " cooked header 20 + IPv4 header up to 60 + TCP header with the full 40 bytes of"
        " options 60, so every MPTCP option (DSS) is captured)"
    )


def test_sweep_values_are_type_checked() -> None:
    assert spec_error(BASE + "sweep:\n  axes:\n    variants.tcp_wifi.path: [wifi, lte]\n") == (
        "t.yaml",
        18,
        "sweep.axes[variants.tcp_wifi.path]",
        "value 'lte': no path named 'lte'; paths: wifi, cell",
    )


@pytest.mark.parametrize(
    ("axis", "values", "message"),
    [
        ("paths.wifi.aqm", "[pfifo, sfq]", "value 'sfq': must be 'pfifo', 'fq_codel' or 'cake'"),
        ("paths.wifi.rate_mbit", "[5, -1]", "value -1: must be greater than 0, got -1"),
        ("paths.cell.down.delay_ms", "[5, -3]", "value -3: must be greater than or equal to 0"),
    ],
)
def test_a_sweep_value_is_named_by_its_axis_not_by_the_model_it_lands_in(
    axis: str, values: str, message: str
) -> None:
    """The axis already names the field: the error does not add where the value lands
    inside the path (`down.aqm`), which the user never wrote."""
    err = spec_error(BASE + f"sweep:\n  axes:\n    {axis}: {values}\n")
    assert err[2] == f"sweep.axes[{axis}]" and err[3].startswith(message), err


def test_unreadable_file(tmp_path: FsPath) -> None:
    with pytest.raises(SpecError) as exc:
        load_campaign(tmp_path / "missing.yaml")
    assert (
        str(exc.value)
        == f"{tmp_path}/missing.yaml: cannot read the file: No such file or directory"
    )


def test_oversized_file_is_refused_unread(tmp_path: FsPath) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(BASE + "#" * 70_000 + "\n")
    with pytest.raises(SpecError) as exc:
        load_campaign(big)
    assert str(exc.value) == f"{big}: file larger than 65536 bytes; not a campaign"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, len(BASE) - 1),
            st.integers(0, 4),
            st.text(alphabet=" :-[]{}&*!|>'\"#\n\t0123456789.abcxyz,?%@`\\\x00\xe9", max_size=3),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_mutated_campaigns_give_a_spec_error_or_a_campaign(
    edits: list[tuple[int, int, str]],
) -> None:
    text = BASE
    for pos, cut, insert in edits:
        text = text[:pos] + insert + text[pos + cut :]
    try:
        parse_campaign(text.encode("utf-8", "surrogatepass"), "t.yaml")
    except SpecError as e:
        assert all("\n" not in str(one) for one in e.errors)
        assert str(e).startswith("t.yaml")
