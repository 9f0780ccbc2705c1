"""Run a campaign with `mprig run` inside the shared VM (sharedvm.py), for the VM test
modules' fixtures; such a module is marked `shared_vm`.

Only the campaign's runs are measurements, so only they need the other tests to wait
(tests/quiet.py). The rig is built first, outside that quiet section (`rig_up`): `mprig run`
reuses a rig that is up with its campaign's layout, and building the namespaces and sshds
took about 45 s of each campaign's start under emulation while the other tests waited."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from quiet import quiet
from sharedvm import SHARED

from mprig.rig.vmsession import VmSession


def rig_up(vm: VmSession, spec: Path, rig: str) -> None:
    """Build `rig` for the campaign file `spec` in the guest, as `mprig run` would there
    (no Ansible inside the VM), so that its run starts on a rig that is up."""
    argv = [sys.executable, "-m", "mprig.cli", "rig", "up", "--rig", rig, "--campaign", str(spec)]
    done = vm.run([*argv, "--no-provision"], timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


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
        rig_up(vm, spec, rig)
        with quiet(f"{name} campaign"):
            done = vm.run(argv, timeout=timeout)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        yield out / name
    finally:
        shutil.rmtree(out, ignore_errors=True)
