"""Run a campaign with `mprig run` inside the shared VM (sharedvm.py), for the VM test
modules' fixtures; such a module is marked `shared_vm`."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from quiet import quiet
from sharedvm import SHARED


@contextmanager
def campaign_in_vm(text: str, name: str, *, rig: str, timeout: float) -> Iterator[Path]:
    """Write the campaign YAML `text` (campaign `name`), run it inside the shared VM on rig `rig`,
    and yield its results directory; everything is removed afterwards. Every campaign is a
    measurement in an emulated guest, so it runs while the other tests wait (tests/quiet.py)."""
    out = SHARED.workdir(f"{rig}-")
    try:
        spec = out / f"{name}.yaml"
        spec.write_text(text)
        argv = [sys.executable, "-m", "mprig.cli", "run", str(spec), "--no-vm", "--quiet"]
        argv += ["--rig", rig, "--results", str(out)]
        vm = SHARED.get()
        with quiet(f"{name} campaign"):
            done = vm.run(argv, timeout=timeout)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        yield out / name
    finally:
        shutil.rmtree(out, ignore_errors=True)
