"""Distance on a real rig: programmable RF attenuators, or AP transmit power as a fallback.

A spec's distance d maps to extra attenuation through the log-distance path-loss model of
mprig.campaign.wifi, the one the virtual rig uses (paper 003: PL(d) = PL(1 m) + 10 n log10(d / 1 m),
PL(1 m) = 46.67 dB): the radios already sit `physical_m` apart, so the attenuator adds
PL(d) - PL(physical_m).

Drivers:
- `RcdatHttp`: Mini-Circuits RCDAT / RCxDAT attenuators over HTTP (Programming Manual, Ethernet
  section): `GET /MN?` -> `MN=RCDAT-6000-90`, `GET /SN?` -> `SN=<serial>`,
  `GET /SETATT=<dB>` -> `1` (set), `2` (above range, set to max) or `0` (failed),
  `GET /ATT?` -> `<dB>`; multi-channel models use `/CHAN:<n>:SETATT:<dB>` and `/CHAN:<n>:ATT?`.
- `TxPower`: lowers the AP's transmit power with `iw dev <if> set txpower fixed <mBm>` when no
  attenuator is wired in; its range is the radio's (typically 0..20 dBm), in whole dB.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Protocol

from mprig.campaign.wifi import Radio, attenuation_db
from mprig.errors import HostError, UsageError
from mprig.rig.host import Host, check_interface

RCDAT_STEP_DB = 0.25  # finest step of the RCDAT family


def attenuation_for_distance(
    distance_m: float, physical_m: float, radio: Radio | None = None
) -> float:
    """Extra attenuation that makes radios physical_m apart behave as if distance_m apart
    (mprig.campaign.wifi's path-loss model: the same one the virtual rig uses)."""
    if distance_m < physical_m:
        raise UsageError(
            f"distance {distance_m} m is shorter than the radios' physical separation "
            f"{physical_m} m: move the radios closer or raise the distance"
        )
    return attenuation_db(distance_m, physical_m, radio or Radio())


class Attenuator(Protocol):
    """Anything that adds attenuation to one radio path."""

    @property
    def name(self) -> str:
        """For logs and run.json: "rcdat 10.0.0.9 ch2", "ap:wlan0 txpower"."""
        ...

    def set_db(self, db: float) -> float:
        """Apply db of attenuation; return the value actually applied."""
        ...

    def get_db(self) -> float:
        """The attenuation currently applied."""
        ...


@dataclass(frozen=True)
class RcdatModel:
    """What `MN?` reports."""

    model: str  # e.g. RCDAT-6000-90
    max_freq_mhz: int  # 6000
    max_db: float  # 90.0


def parse_model(text: str) -> RcdatModel:
    """Parse the answer to `MN?`, e.g. `MN=RCDAT-6000-90` or `MN=RC4DAT-8G-95`."""
    m = re.fullmatch(r"MN=(\w+)-(\d+)(G?)-(\d+(?:\.\d+)?)\s*", text)
    if not m:
        raise ValueError(f"not a Mini-Circuits model answer: {text!r}")
    freq = int(m[2]) * (1000 if m[3] else 1)
    return RcdatModel(model=f"{m[1]}-{m[2]}{m[3]}-{m[4]}", max_freq_mhz=freq, max_db=float(m[4]))


def parse_set_answer(text: str) -> int:
    """The status code of a SETATT answer: 1 set, 2 clipped to max, 0 failed."""
    code = text.strip()
    if code not in ("0", "1", "2"):
        raise ValueError(f"unexpected SETATT answer {text!r}")
    return int(code)


@dataclass
class RcdatHttp:
    """A Mini-Circuits RCDAT-style attenuator (one channel of it) controlled over HTTP."""

    host: str  # IP or name of the attenuator's Ethernet port
    port: int = 80
    channel: int | None = None  # 1-based channel on multi-channel models; None = single
    timeout: float = 2.0  # seconds per HTTP request
    max_db: float | None = None  # filled by check() from `MN?`

    @property
    def name(self) -> str:
        return f"rcdat {self.host}:{self.port}" + (f" ch{self.channel}" if self.channel else "")

    def _get(self, command: str) -> str:
        url = f"http://{self.host}:{self.port}/{command}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as reply:
                return str(reply.read().decode("ascii", "replace")).strip()
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise HostError(
                self.name, f"GET /{command} failed ({e}); check the attenuator's IP and cabling"
            ) from e

    def check(self) -> RcdatModel:
        """Ask the model number; learn the attenuation range from it."""
        answer = self._get("MN?")
        try:
            model = parse_model(answer)
        except ValueError as e:
            raise HostError(self.name, f"{e}; is this a Mini-Circuits RCDAT?") from e
        self.max_db = model.max_db
        return model

    def serial(self) -> str:
        """The serial number (`SN?`)."""
        return self._get("SN?").removeprefix("SN=")

    def set_db(self, db: float) -> float:
        """Set attenuation, rounded to the 0.25 dB step; refuse values outside the range."""
        top = self.max_db if self.max_db is not None else self.check().max_db
        value = round(db / RCDAT_STEP_DB) * RCDAT_STEP_DB
        if not 0.0 <= value <= top:
            raise UsageError(f"{self.name}: {db} dB is outside 0..{top} dB")
        prefix = f"CHAN:{self.channel}:SETATT:" if self.channel else "SETATT="
        code = parse_set_answer(self._get(f"{prefix}{value:g}"))
        if code != 1:
            what = "clipped to its maximum" if code == 2 else "refused the setting"
            raise HostError(self.name, f"attenuator {what} ({value:g} dB)")
        return value

    def get_db(self) -> float:
        """Read back the attenuation."""
        answer = self._get(f"CHAN:{self.channel}:ATT?" if self.channel else "ATT?")
        try:
            return float(answer)
        except ValueError as e:
            raise HostError(self.name, f"unexpected ATT? answer {answer!r}") from e


def parse_iw_txpower(text: str) -> float:
    """The `txpower 20.00 dBm` line of `iw dev <if> info`."""
    m = re.search(r"^\s*txpower\s+(-?\d+(?:\.\d+)?)\s+dBm\s*$", text, re.M)
    if not m:
        raise ValueError("no txpower line in `iw dev ... info` output")
    return float(m[1])


@dataclass
class TxPower:
    """Attenuation by lowering a radio's transmit power: txpower = max_dbm - attenuation."""

    host: Host  # the AP (or client) whose radio transmits
    interface: str  # e.g. wlan0
    max_dbm: float = 20.0  # the power that corresponds to 0 dB of attenuation
    min_dbm: float = 0.0  # the lowest power the radio accepts

    @property
    def name(self) -> str:
        return f"{self.host.name}:{self.interface} txpower"

    def set_db(self, db: float) -> float:
        """Set the radio to max_dbm - db rounded to whole dBm: mac80211 refuses a fixed power
        that is not (EOPNOTSUPP, net/mac80211/cfg.c), so the applied value is returned."""
        dbm = round(self.max_dbm - db)
        if not self.min_dbm <= dbm <= self.max_dbm:
            raise UsageError(
                f"{self.name}: {db:g} dB needs {dbm:g} dBm, outside {self.min_dbm:g}.."
                f"{self.max_dbm:g} dBm; use an RF attenuator for this range"
            )
        self.host.run(["iw", "dev", self.interface, "set", "txpower", "fixed", str(dbm * 100)])
        return self.max_dbm - dbm

    def get_db(self) -> float:
        """max_dbm minus the power `iw dev <if> info` reports."""
        info = self.host.run(["iw", "dev", self.interface, "info"]).stdout
        return self.max_dbm - parse_iw_txpower(info)


@dataclass
class StandInAttenuator:
    """A stand-in for an RF attenuator, not hardware: it keeps the value set and records
    every call, so the runner's distance path runs (and is tested) where no attenuator is
    wired in. Inventory driver `stand-in`."""

    path: str  # the Wi-Fi path it stands in for
    read_offset_db: float = 0.0  # added to what get_db answers (tests of the read-back check)
    calls: list[tuple[str, float]] = field(default_factory=list)  # (method, dB) in order
    value_db: float = 0.0  # the attenuation set last

    @property
    def name(self) -> str:
        return f"stand-in {self.path}"

    def set_db(self, db: float) -> float:
        self.calls.append(("set_db", db))
        self.value_db = db
        return db

    def get_db(self) -> float:
        value = self.value_db + self.read_offset_db
        self.calls.append(("get_db", value))
        return value


@dataclass(frozen=True)
class RadioPath:
    """A lab Wi-Fi path whose distance an attenuator sets (never netem)."""

    attenuator: Attenuator
    physical_m: float = 1.0  # the radios' real separation, metres
    radio: Radio = field(default_factory=Radio)  # the path-loss model's parameters


DRIVERS = ("rcdat", "txpower", "stand-in")


def radio_path(name: str, cfg: Any, hosts: dict[str, Host], where: str) -> RadioPath:
    """One `mprig_attenuators` entry (driver rcdat: host, port, channel; txpower: host,
    interface, max_dbm; stand-in), with `physical_m` and the model's `exponent`. UsageError
    prefixed with `where` (the inventory and the path)."""
    if not isinstance(cfg, dict):
        raise UsageError(f"{where}: must be a mapping (driver: ...), got {cfg!r}")
    physical, exponent = cfg.get("physical_m", 1.0), cfg.get("exponent", Radio().exponent)
    for key, value in (("physical_m", physical), ("exponent", exponent)):
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise UsageError(f"{where}: {key} must be a number > 0, got {value!r}")
    radio = Radio(exponent=float(exponent))
    return RadioPath(_driver(name, cfg, hosts, where), float(physical), radio)


def _driver(name: str, cfg: dict[str, Any], hosts: dict[str, Host], where: str) -> Attenuator:
    driver = cfg.get("driver")
    if driver == "stand-in":
        return StandInAttenuator(name)
    if driver not in DRIVERS:
        raise UsageError(f"{where}: driver must be one of {', '.join(DRIVERS)}, got {driver!r}")
    host = cfg.get("host")
    if not isinstance(host, str) or not host:
        what = "the attenuator's address" if driver == "rcdat" else "the AP's inventory name"
        raise UsageError(f"{where}: driver {driver} needs host ({what})")
    if driver == "rcdat":
        channel = cfg.get("channel")
        return RcdatHttp(host, int(cfg.get("port", 80)), int(channel) if channel else None)
    if host not in hosts:
        raise UsageError(f"{where}: host {host!r} is not in the inventory")
    interface = check_interface(str(cfg.get("interface", "")))
    return TxPower(hosts[host], interface, float(cfg.get("max_dbm", 20.0)))
