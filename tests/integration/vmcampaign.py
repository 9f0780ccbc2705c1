"""Run a campaign with `mprig run` inside one VM, for the VM test modules' fixtures."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mprig.rig import vmsession


@contextmanager
def campaign_in_vm(text: str, name: str, *, rig: str, timeout: float) -> Iterator[Path]:
    """Write the campaign YAML `text` (campaign `name`), run it inside one VM on rig `rig`,
    and yield its results directory; everything is removed afterwards."""
    out = Path(tempfile.mkdtemp(prefix=f"{rig}-", dir="/var/tmp"))  # the VM has its own /tmp
    try:
        spec = out / f"{name}.yaml"
        spec.write_text(text)
        argv = [sys.executable, "-m", "mprig.cli", "run", str(spec), "--no-vm", "--quiet"]
        argv += ["--rig", rig, "--results", str(out)]
        with vmsession.VmSession(rwdirs=[out]) as session:
            done = session.run(argv, timeout=timeout)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        yield out / name
    finally:
        shutil.rmtree(out, ignore_errors=True)
