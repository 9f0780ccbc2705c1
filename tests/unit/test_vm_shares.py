"""`mprig run` in VM mode shares with the guest the inputs the guest cannot see: virtme-ng's
init mounts fresh file systems over /tmp, /run, /var/tmp, /var/log, /var/cache and others,
so a campaign file (or a --skip-archived archive) kept there was "No such file or
directory" inside the guest, after a 30 s boot. The boot is replaced by a recorder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_merge import SPEC

from mprig.cli.main import main
from mprig.rig import vm


@pytest.mark.parametrize(
    ("path", "hidden"),
    [
        ("/var/tmp/check/c.yaml", True),
        ("/tmp/c.yaml", True),
        ("/run/x/c.yaml", True),
        ("/var/cache/mprig/c.yaml", True),
        ("/var/log", True),
        ("/work/main/experiments/smoke.yaml", False),
        ("/var/lib/mprig/c.yaml", False),
        ("/variable/tmp/c.yaml", False),
        ("/tmpfiles/c.yaml", False),
    ],
)
def test_what_the_guest_mounts_afresh_is_hidden(path: str, hidden: bool) -> None:
    assert vm.hidden_in_guest(Path(path)) is hidden


def test_a_campaign_the_guest_cannot_see_is_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared: list[list[Path]] = []

    def record(argv: list[str], rwdirs: list[Path], **_: Any) -> int:
        shared.append(rwdirs)
        return 0

    monkeypatch.setattr(vm, "run_in_vm", record)
    monkeypatch.setenv("MPRIG_VNG", "/usr/bin/vng")
    monkeypatch.setattr(vm, "GUEST_PRIVATE", (tmp_path.resolve(),))  # wherever TMPDIR is
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    (spec_dir / "mc.yaml").write_text(SPEC)
    results = tmp_path / "r"
    argv = ["run", str(spec_dir / "mc.yaml"), "--vm", "--quiet", "--results", str(results)]
    assert main(argv) == 0
    assert shared[-1] == [results / "mc", spec_dir.resolve()]


def test_only_hidden_directories_are_shared_once() -> None:
    dirs = [Path("/var/tmp/c"), Path("/work/main/experiments"), None, Path("/var/tmp/c")]
    assert vm.shares_for(dirs) == [Path("/var/tmp/c")]
