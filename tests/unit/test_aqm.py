"""The queue discipline tree of a path direction (mprig/run/aqm.py), netem's jitter distribution
and Gilbert-Elliott loss arguments, and the read-back of the tree a run set up."""

from __future__ import annotations

from pathlib import Path

from mprig.campaign.spec import Direction, Variant
from mprig.campaign.spec import Path as SpecPath
from mprig.rig.host import PathLink
from mprig.run import aqm, impair
from mprig.stack import isolation

LINK = PathLink("lan", "wired", "eth1", "10.1.3.2", "r3", "lan0", "wan0")
Q = ["tc", "qdisc", "replace", "dev", "lan0"]

# `tc -s qdisc show` on the VM's kernel (Debian 6.1) after the fq_codel tree below in both
# directions, verbatim from a run of tests/integration/test_aqm_vm.py
SNAPSHOT = (Path(__file__).parents[1] / "captures/test_aqm/tc-fq_codel-tree.txt").read_text()


def path(**down: object) -> SpecPath:
    return SpecPath(name="lan", kind="wired", down=Direction(rate_mbit=10, delay_ms=10, **down),
                up=Direction(rate_mbit=10, delay_ms=10))  # fmt: skip


def test_without_aqm_netem_shapes_the_rate_as_before() -> None:
    cmds = impair.apply_commands(path(), LINK)
    assert cmds[0] == (
        "r3",
        [*Q, "root", "netem", "delay", "10ms", "rate", "10mbit", "limit", "1009"],
    )
    assert len(cmds) == 2


def test_fq_codel_sits_in_the_shaper_below_netem() -> None:
    cmds = impair.apply_commands(path(aqm="fq_codel", limit_pkts=500), LINK)
    assert [argv for _, argv in cmds[:3]] == [
        [*Q, "handle", "1:", "root", "netem", "delay", "10ms", "limit", "509"],
        [*Q, "parent", "1:1", "handle", "2:", "tbf", "rate", "10mbit", "burst", "6056",
         "limit", "757000"],
        [*Q, "parent", "2:1", "handle", "3:", "fq_codel", "limit", "500"],
    ]  # fmt: skip
    assert cmds[3][1][5:] == ["root", "netem", "delay", "10ms", "rate", "10mbit", "limit", "1009"]


def test_cake_shapes_itself_below_netem() -> None:
    cmds = impair.apply_commands(path(aqm="cake", limit_pkts=100), LINK)
    assert cmds[1] == ("r3", [*Q, "parent", "1:1", "handle", "2:", "cake", "bandwidth", "10mbit",
                              "memlimit", "151400"])  # fmt: skip
    assert [argv[5] for _, argv in cmds].count("parent") == 1


def test_tbf_burst_is_a_millisecond_and_at_least_four_frames() -> None:
    assert (aqm.burst_bytes(1), aqm.burst_bytes(10), aqm.burst_bytes(1000)) == (6056, 6056, 125000)


def test_jitter_distribution_and_gilbert_elliott_loss() -> None:
    d = Direction(rate_mbit=10, delay_ms=20, jitter_ms=5, jitter_dist="normal", ge_p_pct=1,
                  ge_r_pct=25.5, ge_bad_loss_pct=80)  # fmt: skip
    assert impair.netem_args(d)[:11] == ["delay", "20ms", "5ms", "distribution", "normal",
                                         "loss", "gemodel", "1%", "25.5%", "80%", "0%"]  # fmt: skip
    uniform = Direction(rate_mbit=10, delay_ms=20, jitter_ms=5, jitter_dist="uniform")
    assert impair.netem_args(uniform)[:4] == ["delay", "20ms", "5ms", "rate"]


def test_the_tree_read_back_matches_and_is_recorded() -> None:
    setup = impair.apply_commands(path(aqm="fq_codel"), LINK)
    settings: dict[str, dict[str, object]] = {"r3": {"sysctls": {}}}
    assert aqm.record_trees(setup, {"r3": SNAPSHOT}, settings) == []
    assert settings["r3"]["qdisc_tree"] == {
        "lan0": ["netem 1: (root)", "tbf 2: (1:1)", "fq_codel 3: (2:1)"]
    }


def test_a_tree_that_differs_fails_the_check() -> None:
    setup = impair.apply_commands(path(aqm="pfifo"), LINK)
    wrong = aqm.record_trees(setup, {"r3": SNAPSHOT}, {})
    assert wrong == [
        "r3: lan0: qdiscs netem 1: (root), tbf 2: (1:1), fq_codel 3: (2:1), spec netem 1: (root),"
        " tbf 2: (1:1), pfifo 3: (2:1)"
    ]


def test_isolation_expects_netem_at_the_root_of_an_aqm_tree() -> None:
    setup = impair.apply_commands(path(aqm="fq_codel"), LINK)
    base = {h: isolation.HostSettings() for h in ("client", "server", "r3")}
    want = isolation.expected(base, Variant(name="m"), (LINK,), setup)
    assert want["r3"].devices == {"lan0": {"qdisc": "netem"}, "wan0": {"qdisc": "netem"}}
