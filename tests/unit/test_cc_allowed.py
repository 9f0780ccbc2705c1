"""The machine-wide allowed congestion-control list (mprig.stack.cc_allowed): widened for a
campaign, narrowed after it, also after a campaign killed before its `finally` ran (a
forked child leaving with os._exit stands in for kill -9), and never narrowed under a live
campaign or below what was there before mprig."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mprig.errors import ToolMissing
from mprig.stack import cc_allowed


@pytest.fixture
def allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A stand-in for /proc/sys/net/ipv4/tcp_allowed_congestion_control, 'reno bbr' at boot."""
    path = tmp_path / "tcp_allowed_congestion_control"
    path.write_text("reno bbr\n")
    monkeypatch.setattr(cc_allowed, "ALLOWED_CC", path)
    monkeypatch.setattr(cc_allowed, "JOURNAL", tmp_path / "allowed-cc")
    monkeypatch.setattr(cc_allowed.subprocess, "run", lambda *a, **k: None)  # no modprobe
    monkeypatch.setattr(cc_allowed.bpfcc, "ensure_loaded", lambda names: [])  # no BPF build
    yield path


def forked(body: Callable[[], None], status: int) -> int:
    """Run BODY in a forked child that leaves with os._exit(STATUS) (no `finally` runs, no
    flock survives: what kill -9 leaves); its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            os._exit(status)
    return pid


def in_child(body: Callable[[], None]) -> int:
    """BODY's exit status in a forked child (1 unless it leaves with 0 itself, as
    killed_inside does from inside the block)."""
    return os.waitstatus_to_exitcode(os.waitpid(forked(body, 1), 0)[1])


def killed_inside(names: list[str]) -> Callable[[], None]:
    def body() -> None:
        with cc_allowed.allow(names):
            os._exit(0)

    return body


def test_a_campaign_widens_the_list_and_restores_it(allowed: Path) -> None:
    with cc_allowed.allow(["cubic", "reno"]):
        assert allowed.read_text().split() == ["reno", "bbr", "cubic"]
    assert allowed.read_text().split() == ["reno", "bbr"]


def test_additions_of_a_killed_campaign_are_undone_by_the_next(allowed: Path) -> None:
    assert in_child(killed_inside(["cubic", "olia"])) == 0
    assert allowed.read_text().split() == ["reno", "bbr", "cubic", "olia"]  # the leak
    said: list[str] = []
    with cc_allowed.allow(["olia"], said.append):
        assert allowed.read_text().split() == ["reno", "bbr", "olia"]
    assert allowed.read_text().split() == ["reno", "bbr"]
    assert len(said) == 1 and "cubic" in said[0] and "olia" not in said[0]
    assert sorted(p.name for p in cc_allowed.JOURNAL.iterdir()) == [".lock", "added.json"]


def test_names_allowed_before_mprig_stay_after_a_kill(allowed: Path) -> None:
    allowed.write_text("reno bbr cubic\n")
    assert in_child(killed_inside(["cubic", "lia"])) == 0
    with cc_allowed.allow([]):
        pass
    assert allowed.read_text().split() == ["reno", "bbr", "cubic"]


def test_a_live_campaign_keeps_what_it_needs(allowed: Path) -> None:
    """Campaign A (a child) adds cubic; B, in this process, needs it too and adds lia. A
    ending first leaves cubic; B ending removes both. And B ending first leaves A's names."""
    go, done = os.pipe(), os.pipe()

    def campaign_a() -> None:
        with cc_allowed.allow(["cubic"]):
            os.write(go[1], b"x")
            os.read(done[0], 1)

    pid = forked(campaign_a, 0)
    os.read(go[0], 1)
    with cc_allowed.allow(["cubic", "lia"]):
        assert allowed.read_text().split() == ["reno", "bbr", "cubic", "lia"]
        os.write(done[1], b"x")
        os.waitpid(pid, 0)
        assert allowed.read_text().split() == ["reno", "bbr", "cubic", "lia"]
    assert allowed.read_text().split() == ["reno", "bbr"]

    pid = forked(campaign_a, 0)
    os.read(go[0], 1)
    with cc_allowed.allow(["lia"]):
        pass
    assert allowed.read_text().split() == ["reno", "bbr", "cubic"]
    os.write(done[1], b"x")
    os.waitpid(pid, 0)
    assert allowed.read_text().split() == ["reno", "bbr"]


class Refusing:
    """A list the kernel refuses to widen with a name it does not have."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read_text(self) -> str:
        return self.path.read_text()

    def write_text(self, text: str) -> None:
        if "nope" in text.split():
            raise OSError(2, "No such file or directory")
        self.path.write_text(text)


def test_an_unknown_name_is_refused_and_nothing_is_left(
    allowed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cc_allowed, "ALLOWED_CC", Refusing(allowed))
    with pytest.raises(ToolMissing, match="nope is not available"), cc_allowed.allow(["nope"]):
        pass
    assert allowed.read_text().split() == ["reno", "bbr"]
    assert sorted(p.name for p in cc_allowed.JOURNAL.iterdir()) == [".lock", "added.json"]
    assert (cc_allowed.JOURNAL / "added.json").read_text().split() == ["[]"]
