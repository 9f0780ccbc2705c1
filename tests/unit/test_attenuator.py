"""mprig.rig.attenuator against a local HTTP test double of a Mini-Circuits RCDAT.

No RF attenuator is attached to this machine, so `FakeRcdatServer` below stands in for one:
it listens on 127.0.0.1 and answers the documented command set (MN?, SN?, SETATT=, ATT?,
CHAN:n:SETATT:, CHAN:n:ATT?) the way the hardware does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest

from mprig.campaign.wifi import Radio
from mprig.errors import HostError, UsageError
from mprig.rig.attenuator import (
    RcdatHttp,
    RcdatModel,
    TxPower,
    attenuation_for_distance,
    parse_iw_txpower,
    parse_model,
)
from mprig.rig.host import Host, Result


@dataclass
class FakeRcdatState:
    """What the test double remembers: per-channel attenuation and every request path."""

    model: str = "MN=RCDAT-6000-90"
    channels: dict[int, float] = field(default_factory=lambda: {1: 0.0, 2: 0.0})
    requests: list[str] = field(default_factory=list)


class FakeRcdatHandler(BaseHTTPRequestHandler):
    """HTTP test double for an RCDAT attenuator (answers like the Programming Manual says)."""

    state: FakeRcdatState

    def do_GET(self) -> None:
        self.state.requests.append(self.path)
        self._reply(self._answer(self.path.lstrip("/")))

    def _answer(self, cmd: str) -> str:
        if cmd == "MN?":
            return self.state.model
        if cmd == "SN?":
            return "SN=11904040001"
        if cmd == "ATT?":
            return f"{self.state.channels[1]:g}"
        if cmd.startswith("SETATT="):
            return self._set(1, cmd.removeprefix("SETATT="))
        if cmd.startswith("CHAN:"):
            _, chan, rest = cmd.split(":", 2)
            if rest == "ATT?":
                return f"{self.state.channels[int(chan)]:g}"
            return self._set(int(chan), rest.removeprefix("SETATT:"))
        return "0"

    def _set(self, chan: int, value: str) -> str:
        db = float(value)
        self.state.channels[chan] = min(db, 90.0)
        return "2" if db > 90.0 else "1"

    def _reply(self, body: str) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def fake_rcdat() -> Iterator[tuple[FakeRcdatState, int]]:
    state = FakeRcdatState()
    handler = type("Handler", (FakeRcdatHandler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join()


def test_attenuation_is_loss_at_distance_minus_loss_at_bench_separation() -> None:
    radio = Radio(exponent=3.0)  # PL(d) = 46.6777 + 30 log10(d): 30 dB per decade
    assert round(attenuation_for_distance(100.0, 1.0, radio), 3) == 60.0
    assert round(attenuation_for_distance(50.0, 1.0, radio), 3) == 50.969
    assert attenuation_for_distance(2.0, 2.0) == 0.0
    with pytest.raises(UsageError, match="shorter than the radios' physical separation"):
        attenuation_for_distance(1.0, 2.0)


def test_parse_model_answers() -> None:
    assert parse_model("MN=RCDAT-6000-90") == RcdatModel("RCDAT-6000-90", 6000, 90.0)
    assert parse_model("MN=RC4DAT-8G-95\r\n") == RcdatModel("RC4DAT-8G-95", 8000, 95.0)
    with pytest.raises(ValueError, match="not a Mini-Circuits model answer"):
        parse_model("<html>")


def test_single_channel_set_get_and_check(fake_rcdat: tuple[FakeRcdatState, int]) -> None:
    state, port = fake_rcdat
    att = RcdatHttp("127.0.0.1", port)
    assert att.check() == RcdatModel("RCDAT-6000-90", 6000, 90.0)
    assert att.serial() == "11904040001"
    assert att.set_db(30.1) == 30.0  # rounded to the 0.25 dB step
    assert att.get_db() == 30.0
    assert state.requests == ["/MN?", "/SN?", "/SETATT=30", "/ATT?"]


def test_multi_channel_addresses_one_channel(fake_rcdat: tuple[FakeRcdatState, int]) -> None:
    state, port = fake_rcdat
    att = RcdatHttp("127.0.0.1", port, channel=2, max_db=90.0)
    assert (att.set_db(12.5), att.get_db()) == (12.5, 12.5)
    assert (state.channels, state.requests) == (
        {1: 0.0, 2: 12.5},
        ["/CHAN:2:SETATT:12.5", "/CHAN:2:ATT?"],
    )
    assert att.name == f"rcdat 127.0.0.1:{port} ch2"


def test_out_of_range_is_refused_before_sending(fake_rcdat: tuple[FakeRcdatState, int]) -> None:
    state, port = fake_rcdat
    att = RcdatHttp("127.0.0.1", port)
    with pytest.raises(UsageError, match=r"95 dB is outside 0..90.0 dB"):
        att.set_db(95)
    assert state.requests == ["/MN?"]


def test_clipped_answer_is_an_error(fake_rcdat: tuple[FakeRcdatState, int]) -> None:
    state, port = fake_rcdat
    att = RcdatHttp("127.0.0.1", port, max_db=120.0)  # wrong range configured by hand
    with pytest.raises(HostError, match=r"clipped to its maximum \(100 dB\)"):
        att.set_db(100)
    assert state.channels == {1: 90.0, 2: 0.0}


def test_unreachable_attenuator_names_itself() -> None:
    att = RcdatHttp("127.0.0.1", 9, timeout=0.5)  # discard port: nothing listens
    with pytest.raises(HostError, match=r"^rcdat 127.0.0.1:9: GET /MN\? failed"):
        att.check()


IW_INFO = """\
Interface wlan0
\tifindex 5
\twdev 0x100000001
\taddr 02:00:00:00:01:00
\tssid mprig
\ttype AP
\twiphy 1
\tchannel 6 (2437 MHz), width: 20 MHz (no HT), center1: 2437 MHz
\ttxpower 14.00 dBm
"""


def test_parse_iw_txpower() -> None:
    assert parse_iw_txpower(IW_INFO) == 14.0
    with pytest.raises(ValueError, match="no txpower line"):
        parse_iw_txpower("Interface wlan0\n")


@dataclass
class FakeAp:
    """The AP's side of `iw`: keeps the txpower set and reports it like `iw dev X info`,
    refusing what mac80211 refuses (net/mac80211/cfg.c: a fixed power must be whole dBm)."""

    name: str = "ap"
    dbm: float = 20.0
    argvs: list[list[str]] = field(default_factory=list)

    def run(self, argv: Sequence[str], **_: Any) -> Result:
        self.argvs.append(list(argv))
        if argv[3:5] == ["set", "txpower"]:
            mbm = int(argv[-1])
            if mbm < 0 or mbm % 100:
                raise HostError(self.name, "command failed (-95): Operation not supported")
            self.dbm = mbm / 100
        return Result(tuple(argv), 0, f"\ttxpower {self.dbm:.2f} dBm\n", "", 0.0)


def test_txpower_sets_whole_dbm_as_mac80211_requires() -> None:
    ap = FakeAp()
    tx = TxPower(cast(Host, ap), "lan0", max_dbm=20.0)
    assert (tx.set_db(6.6), tx.get_db()) == (7.0, 7.0)  # 13.4 dBm -> 13
    assert ap.argvs[0] == ["iw", "dev", "lan0", "set", "txpower", "fixed", "1300"]
    with pytest.raises(UsageError, match=r"outside 0\.\.20 dBm"):
        tx.set_db(20.6)  # rounds to -1 dBm
