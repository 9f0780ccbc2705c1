"""Draw docs/wifi-model.png: the Wi-Fi model's goodput and residual loss against distance.

Run from the repository root: `.venv/bin/python docs/make_wifi_figure.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mprig.campaign import wifi

OUT = Path(__file__).with_name("wifi-model.png")
DISTANCES = [float(d) for d in range(5, 151, 5)]
CURVES = [  # (label, standard, fixed PHY rate or None for rate selection)
    ("11g 54 Mbit/s (fixed, papers 000/003)", "11g", 54.0),
    ("11g 6 Mbit/s (fixed, paper 003 sc. 4)", "11g", 6.0),
    ("11b 2 Mbit/s (fixed, paper 003 sc. 2-4)", "11b", 2.0),
    ("11g rate selection", "11g", None),
]


def main() -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_rate, ax_loss) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True)
    for label, standard, rate in CURVES:
        est = [wifi.link(d, standard, rate) for d in DISTANCES]  # type: ignore[arg-type]
        ax_rate.plot(DISTANCES, [e.goodput_mbit for e in est], label=label)
        ax_loss.plot(DISTANCES, [max(e.loss_pct, 1e-4) for e in est], label=label)
    ax_rate.set_ylabel("MAC goodput, TCP payload (Mbit/s)\n= netem rate x 1400/1440")
    ax_rate.axhline(1.0, color="grey", lw=0.5, ls=":")
    ax_rate.legend(fontsize=8)
    ax_loss.set_yscale("log")
    ax_loss.set_ylim(1e-4, 100)
    ax_loss.set_ylabel("residual loss after 7 attempts (%)\n= netem loss")
    ax_loss.set_xlabel("distance to the AP (m)")
    r = wifi.Radio()
    fig.suptitle(
        f"mprig Wi-Fi model: log-distance n={r.exponent}, PL(1 m)={r.reference_loss_db} dB, "
        f"Ptx={r.tx_power_dbm} dBm,\nNF={r.noise_figure_db} dB, Nakagami m=1.5 (<80 m) / 0.75, "
        "NIST/DSSS error models, 1400 B segments",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(OUT, dpi=110)
    print(OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
