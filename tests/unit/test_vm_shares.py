"""`mprig run` in VM mode shares with the guest the inputs the guest cannot see: virtme-ng's
init mounts fresh file systems over /run, /var/tmp, /var/log, /var/cache and others, so a
campaign file (or a --skip-archived archive, or a path's trace) kept there was "No such
file or directory" inside the guest, after a 30 s boot. /tmp is not one of them: vng
overlays the host's. The boot is replaced by a recorder."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from test_merge import SPEC
from test_spec_timeline import ALT, campaign

from mprig.cli.main import main
from mprig.errors import MprigError
from mprig.rig import vm, vmshares


@pytest.mark.parametrize(
    ("path", "hidden"),
    [
        ("/var/tmp/check/c.yaml", True),
        ("/tmp/c.yaml", False),  # an overlay on the host's /tmp: read through
        ("/tmp/ci/.venv/bin/python", False),
        ("/var/lib/sudo/c.yaml", True),
        ("/lib/modules/6.1.0-57-amd64", True),
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
    assert vmshares.hidden_in_guest(Path(path)) is hidden


def recorder(monkeypatch: pytest.MonkeyPatch) -> list[list[Path]]:
    """The directories each boot would have shared; the boot itself is not made."""
    shared: list[list[Path]] = []

    def record(argv: list[str], rwdirs: list[Path], **_: Any) -> int:
        shared.append(rwdirs)
        return 0

    monkeypatch.setattr(vm, "run_in_vm", record)
    monkeypatch.setenv("MPRIG_VNG", "/usr/bin/vng")
    return shared


def test_a_campaign_the_guest_cannot_see_is_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = recorder(monkeypatch)
    monkeypatch.setattr(vmshares, "GUEST_PRIVATE", (tmp_path.resolve(),))  # wherever TMPDIR is
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    (spec_dir / "mc.yaml").write_text(SPEC)
    results = tmp_path / "r"
    argv = ["run", str(spec_dir / "mc.yaml"), "--vm", "--quiet", "--results", str(results)]
    assert main(argv) == 0
    assert shared[-1] == [results / "mc", spec_dir.resolve()]


def test_only_hidden_directories_are_shared_once() -> None:
    dirs = [Path("/var/tmp/c"), Path("/work/main/experiments"), None, Path("/var/tmp/c")]
    assert vmshares.shares_for([], dirs) == [Path("/var/tmp/c")]
    files = ["/var/tmp/c/a.yaml", "/var/tmp/c/b.trace", "/work/main/experiments/smoke.yaml"]
    assert vmshares.shares_for(files) == [Path("/var/tmp/c")]


@pytest.mark.parametrize("where", ["/var/tmp", "/run", "/var/log"])
def test_an_input_directly_where_the_guest_mounts_afresh_is_refused(where: str) -> None:
    with pytest.raises(
        MprigError, match=re.escape(f"{where}/c.yaml: the VM mounts a fresh {where} ")
    ) as e:
        vmshares.shares_for([f"{where}/c.yaml"])
    assert f"mkdir {where}/mine" in str(e.value)


def test_a_relative_input_shares_the_working_directory_when_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vmshares, "GUEST_PRIVATE", (tmp_path.resolve(),))
    work = tmp_path / "work"
    (work / "traces").mkdir(parents=True)
    monkeypatch.chdir(work)
    assert vmshares.shares_for(["traces/a.trace"]) == [work.resolve()]  # the traces with it
    assert vmshares.shares_for([str(work / "traces" / "a.trace")]) == [work.resolve() / "traces"]
    monkeypatch.chdir(tmp_path)  # the root itself: the guest could not resolve it there
    with pytest.raises(MprigError, match=r"a\.trace: the VM mounts a fresh"):
        vmshares.shares_for(["a.trace"])


def test_a_trace_the_guest_cannot_see_is_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = recorder(monkeypatch)
    monkeypatch.setattr(vmshares, "GUEST_PRIVATE", (tmp_path.resolve(),))
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "a.trace").write_text(ALT.read_text())
    spec = tmp_path / "specs" / "traced.yaml"
    spec.parent.mkdir()
    spec.write_text(campaign(str(traces / "a.trace")).replace("name: t\n", "name: traced\n", 1))
    results = tmp_path / "r"
    argv = ["run", str(spec), "--vm", "--quiet", "--results", str(results)]
    assert main(argv) == 0
    assert shared[-1] == [results / "traced", spec.parent.resolve(), traces.resolve()]


def test_an_input_the_guest_cannot_share_stops_before_the_boot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = recorder(monkeypatch)
    monkeypatch.setattr(vmshares, "GUEST_PRIVATE", (tmp_path.resolve(),))
    (tmp_path / "mc.yaml").write_text(SPEC)
    argv = ["run", str(tmp_path / "mc.yaml"), "--vm", "--quiet", "--results", str(tmp_path)]
    assert main(argv) == 1  # an MprigError: said, no traceback
    assert shared == []
    err = capsys.readouterr().err
    assert f"{tmp_path.resolve() / 'mc.yaml'}: the VM mounts a fresh" in err
    assert "Traceback" not in err


def test_validate_warns_of_an_input_a_vm_run_would_refuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(vmshares, "GUEST_PRIVATE", (tmp_path.resolve(),))
    (tmp_path / "mc.yaml").write_text(SPEC)
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "mc.yaml").write_text(SPEC)
    assert main(["validate", str(tmp_path / "ok" / "mc.yaml")]) == 0
    assert capsys.readouterr().err == ""
    assert main(["validate", str(tmp_path / "mc.yaml")]) == 0  # a native run can read it
    err = capsys.readouterr().err
    assert err.startswith(f"mprig: warning: {tmp_path.resolve() / 'mc.yaml'}: the VM mounts")
    assert err.rstrip().endswith("(when it runs in a VM)")


def test_a_nested_directory_is_shared_through_its_parent() -> None:
    dirs = ["/var/tmp/clone/.venv", "/var/tmp/clone", "/var/tmp/other"]
    assert vmshares.shares_for([], dirs) == [Path("/var/tmp/clone"), Path("/var/tmp/other")]


def test_the_guest_gets_mprig_itself_when_it_lies_where_the_guest_mounts_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clone in /var/tmp: the guest would find neither the venv's python nor the code."""
    code = Path(vm.__file__).resolve().parents[2]
    booted: list[list[Path]] = []

    def boot(share: Path, rwdirs: list[Path], *_: Any) -> int:
        booted.append(list(rwdirs))
        (share / "status").write_text("0\n")
        return 0

    monkeypatch.setattr(vm, "_boot", boot)
    monkeypatch.setattr(vm, "SHARE_ROOT", tmp_path)
    monkeypatch.setenv("MPRIG_BPF_CACHE", str(tmp_path / "bpf"))
    monkeypatch.setenv("MPRIG_VM_BOOT_LOCK", str(tmp_path / "lock"))  # not a real VM's
    assert vm.run_in_vm(["true"], [tmp_path / "r"]) == 0
    monkeypatch.setattr(vmshares, "GUEST_PRIVATE", (code.parent,))
    assert vm.run_in_vm(["true"], [tmp_path / "r"]) == 0
    assert booted[0] == [tmp_path / "r", tmp_path / "bpf"]
    assert booted[1] == [
        tmp_path / "r",
        tmp_path / "bpf",
        *vmshares.shares_for([], vm._code_dirs()),
    ]
    assert code in booted[1]


def test_no_more_directories_are_shared_than_a_boot_takes() -> None:
    """Six shared directories panic the stock kernel before userspace ("Too many boot env
    vars": vng passes 3 boot variables per directory to init, Linux at most 32) and vng
    exits 255 without a word; the exchange directory is one of the five."""
    fixed = [Path("/work/r/c"), Path("/var/cache/mprig/bpf")]
    inputs = [Path("/var/tmp/c/specs"), Path("/var/tmp/c/traces"), Path("/var/tmp/clone")]
    fitted = vmshares.fit_shares([*fixed, *inputs, Path("/var/tmp/clone/.venv")])
    assert fitted == [
        fixed[0],
        Path("/var/cache/mprig"),
        Path("/var/tmp/c"),
        Path("/var/tmp/clone"),
    ]
    assert vmshares.fit_shares([*fixed, *inputs[:2]]) == [*fixed, *inputs[:2]]  # as given
    many = [*fixed, Path("/var/tmp/a/x"), Path("/var/tmp/b/x"), Path("/var/cache/c/x")]
    with pytest.raises(MprigError, match="would need 6 shared directories and boots with at"):
        vmshares.fit_shares(many)
