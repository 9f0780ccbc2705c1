"""Wi-Fi channel model, the PHY: the 802.11b/g modes and their bit and frame error rates.

NS-3 NistErrorRateModel for OFDM (Pei and Henderson, "Validation of OFDM error rate model
in ns-3", 2010: uncoded M-QAM BER, then the union bound of the 802.11 convolutional code
at rate 1/2, 2/3, 3/4) and NS-3 DsssErrorRateModel for DSSS/HR-DSSS (DBPSK, DQPSK closed
forms; the Matlab fits for CCK); the frame error rate averaged over Nakagami-m fading, and
per-mode SNR thresholds at the 802.11-2016 sensitivity criterion (FER <= 10 %). The
distance, MAC and calibration stages that use them are in mprig/campaign/wifi.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

Standard = Literal["11b", "11g"]


TARGET_FER = 0.10  # 802.11-2016 sensitivity criterion (PER/FER at most 10 %)


@dataclass(frozen=True)
class PhyMode:
    """One 802.11 PHY mode (modulation and coding) and what the error model needs of it."""

    standard: Standard
    rate_mbit: float  # PHY data rate
    modulation: str  # dbpsk, dqpsk, cck55, cck11 (DSSS); bpsk, qpsk, qam16, qam64 (OFDM)
    code_b: int  # convolutional code: 1 = rate 1/2, 2 = 2/3, 3 = 3/4; 0 for DSSS
    sensitivity_dbm: float | None  # 802.11-2016 minimum input sensitivity, where specified


MODES: dict[Standard, tuple[PhyMode, ...]] = {
    "11b": (
        PhyMode("11b", 1.0, "dbpsk", 0, None),
        PhyMode("11b", 2.0, "dqpsk", 0, -80.0),  # 15.4.8.2, FER 8 % at 1024 octets
        PhyMode("11b", 5.5, "cck55", 0, None),
        PhyMode("11b", 11.0, "cck11", 0, -76.0),  # 16.3.8.2, FER 8 % at 1024 octets
    ),
    "11g": (  # Table 17-18, 20 MHz channel
        PhyMode("11g", 6.0, "bpsk", 1, -82.0),
        PhyMode("11g", 9.0, "bpsk", 3, -81.0),
        PhyMode("11g", 12.0, "qpsk", 1, -79.0),
        PhyMode("11g", 18.0, "qpsk", 3, -77.0),
        PhyMode("11g", 24.0, "qam16", 1, -74.0),
        PhyMode("11g", 36.0, "qam16", 3, -70.0),
        PhyMode("11g", 48.0, "qam64", 2, -66.0),
        PhyMode("11g", 54.0, "qam64", 3, -65.0),
    ),
}


def find_mode(standard: Standard, rate_mbit: float) -> PhyMode:
    """The PHY mode of `standard` at `rate_mbit`; ValueError naming the valid rates."""
    for mode in MODES[standard]:
        if math.isclose(mode.rate_mbit, rate_mbit):
            return mode
    rates = ", ".join(f"{m.rate_mbit:g}" for m in MODES[standard])
    raise ValueError(f"802.{standard} has no {rate_mbit:g} Mbit/s mode (valid: {rates})")


# --- bit error rates (NS-3 NistErrorRateModel / DsssErrorRateModel) --------------------

_UNION_BOUND: dict[int, tuple[float, int, tuple[float, ...]]] = {
    # b -> (factor, first distance, weights): coded BER <= factor * sum(w_d * D^d)
    1: (0.5, 10, (36, 0, 211, 0, 1404, 0, 11633, 0, 77433, 0, 502690, 0, 3322763, 0,
                  21292910, 0, 134365911)),
    2: (1 / 4, 6, (3, 70, 285, 1276, 6160, 27128, 117019, 498860, 2103891, 8784123)),
    3: (1 / 6, 5, (42, 201, 1492, 10469, 62935, 379644, 2253373, 13073811, 75152755,
                   428005675)),
}  # fmt: skip


def _uncoded_ber(modulation: str, snr: float) -> float:
    if modulation == "bpsk":
        return 0.5 * math.erfc(math.sqrt(snr))
    if modulation == "qpsk":
        return 0.5 * math.erfc(math.sqrt(snr / 2.0))
    if modulation == "qam16":
        return 0.75 * 0.5 * math.erfc(math.sqrt(snr / 10.0))
    return 7.0 / 12.0 * 0.5 * math.erfc(math.sqrt(snr / 42.0))  # qam64


def _coded_ber(p: float, code_b: int) -> float:
    factor, first, weights = _UNION_BOUND[code_b]
    d = math.sqrt(4.0 * p * (1.0 - p))
    total = sum(w * d ** (first + i) for i, w in enumerate(weights) if w)
    return min(1.0, factor * total)


def _cck_ber(modulation: str, snr: float) -> float:
    if snr > 10.0:
        return 0.0
    if snr < 0.1:
        return 0.5
    if modulation == "cck55":
        return 0.53681634344056195 * math.exp(
            -(((snr - 0.0033092430025608586) / 0.41654372361004) ** 1.0288981434358866)
        )
    num = 0.0079056742265333456 * snr * snr - 0.1839744939917636 * snr + 1.0740689468707241
    den = snr**3 + 1.0523316904502553 * snr * snr + 0.30552298746496687 * snr + 2.2032715128698435
    return num / den  # fmt: skip


def bit_error_rate(mode: PhyMode, snr: float) -> float:
    """Bit error rate of `mode` at linear SNR `snr` (NS-3 NIST / DSSS error rate models)."""
    if mode.code_b:
        p = _uncoded_ber(mode.modulation, snr)
        return 0.0 if p == 0.0 else _coded_ber(p, mode.code_b)
    if mode.modulation == "dbpsk":
        return 0.5 * math.exp(-snr * 22.0)
    if mode.modulation == "dqpsk":
        x = snr * 22.0 / 2.0
        return (
            (math.sqrt(2) + 1)
            / math.sqrt(8 * math.pi * math.sqrt(2))
            / math.sqrt(x)
            * (math.exp(-(2 - math.sqrt(2)) * x))
        )
    return _cck_ber(mode.modulation, snr)


def _header_mode(mode: PhyMode) -> tuple[PhyMode, int]:
    """The mode and bit count of the PLCP header (OFDM SIGNAL, DSSS long PLCP header)."""
    if mode.standard == "11g":
        return MODES["11g"][0], 24
    return MODES["11b"][0], 48


def frame_success(mode: PhyMode, snr: float, nbytes: int) -> float:
    """Probability that a frame of `nbytes` (MPDU) at `mode` and linear SNR is received."""
    if snr <= 0:
        return 0.0
    header, header_bits = _header_mode(mode)
    bits = 8 * nbytes + (22 if mode.standard == "11g" else 0)  # OFDM SERVICE + tail
    ok_payload = (1.0 - min(1.0, bit_error_rate(mode, snr))) ** bits
    ok_header = (1.0 - min(1.0, bit_error_rate(header, snr))) ** header_bits
    return ok_payload * ok_header


# --- fading average ---------------------------------------------------------------------

_GRID = tuple(10 ** (-6 + 8 * i / 399) for i in range(400))  # power gain 1e-6 .. 100


def _gamma_pdf(x: float, m: float) -> float:
    return math.exp(m * math.log(m) + (m - 1) * math.log(x) - m * x - math.lgamma(m))


@lru_cache(maxsize=4096)
def frame_error_rate(mode: PhyMode, snr_db: float, m: float, nbytes: int) -> float:
    """Expected frame error rate at mean SNR `snr_db` under Nakagami-m fading (per frame
    block fading, as NS-3 draws one gain per packet), by trapezoidal integration over the
    Gamma(m, 1/m) power gain on a log grid."""
    mean = 10 ** (snr_db / 10.0)
    total = 0.0
    prev_x, prev_f = 0.0, 0.0
    for x in _GRID:
        f = _gamma_pdf(x, m) * (1.0 - frame_success(mode, mean * x, nbytes))
        total += 0.5 * (f + prev_f) * (x - prev_x)
        prev_x, prev_f = x, f
    return min(1.0, max(0.0, total))


@lru_cache(maxsize=256)
def snr_threshold_db(mode: PhyMode, m: float, nbytes: int, target: float = TARGET_FER) -> float:
    """Lowest mean SNR (dB) at which the fading-averaged frame error rate is <= `target`."""
    lo, hi = -10.0, 80.0
    for _ in range(24):
        mid = 0.5 * (lo + hi)
        if frame_error_rate(mode, mid, m, nbytes) <= target:
            hi = mid
        else:
            lo = mid
    return hi
