"""One VM for the VM test modules marked `shared_vm` (the campaign modules: vmcampaign's
users, test_papers, test_run_vm). tests/conftest.py runs them one after the other; the VM
boots when the first of them asks for it and stops after the last (hook below), so a test
session boots it once instead of once per module: about 47 s each under software emulation,
where the boot lock also keeps any other VM from starting while it is up."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from mprig.rig import vmsession
from mprig.stack import bpfcc, vmbpf


class SharedVm:
    """The session's shared VM and the host directory it mounts read-write."""

    def __init__(self) -> None:
        self.session: vmsession.VmSession | None = None
        self.root: Path | None = None

    def get(self) -> vmsession.VmSession:
        """The running VM (booted now if it is not up)."""
        if self.session is None:
            # /var/tmp: the VM has its own /tmp, so the shared directory lives elsewhere
            self.root = Path(tempfile.mkdtemp(prefix="mprig-tests-vm-", dir="/var/tmp"))
            # every mprig BPF congestion control the VM tests load, built on the host before
            # the boot: in the guest, under emulation, each takes 20-40 s of clang
            vmbpf.for_vm(bpfcc.available())
            session = vmsession.VmSession(rwdirs=[self.root])
            session.__enter__()
            self.session = session
        return self.session

    def workdir(self, prefix: str) -> Path:
        """A fresh directory the VM reads and writes at the same path."""
        self.get()
        assert self.root is not None
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.root))

    def close(self) -> None:
        """Stop the VM (if up) and remove its directory."""
        session, self.session = self.session, None
        if session is not None:
            session.__exit__(None, None, None)
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None


SHARED = SharedVm()
