"""One default rig: `mprig probe` without --rig looks for the rig that `mprig rig up` makes
and `mprig run` uses (it once looked for "virtual", so `rig up` then `probe` failed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mprig.rig.layout import DEFAULT_RIG


def test_probe_looks_for_the_rig_that_rig_up_makes(tmp_path: Path) -> None:
    env = {"MPRIG_STATE": str(tmp_path), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "mprig.cli", "probe"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode != 0
    assert f"virtual rig {DEFAULT_RIG!r} is not up" in done.stderr
    assert f"mprig rig up --name {DEFAULT_RIG}" in done.stderr
    for p in ("probe", "run", "rig up"):
        argv = [sys.executable, "-m", "mprig.cli", *p.split(), "--help"]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
        words = " ".join(out.split())  # argparse wraps help where the widest option says
        assert f"default: {DEFAULT_RIG}" in words.replace("default ", "default: "), p
