"""VM boots that are proven, watched and fall back (issue 13), with a stand-in vng.

tests/unit/fakevng/vng stands in for virtme-ng: a QEMU whose KVM boot hangs, aborts or
freezes after boot, and which opens our stdout/stderr by path with O_TRUNC as QEMU does.
No VM is booted; the command "inside" runs on the host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mprig.errors import MprigError
from mprig.rig import kvm, vm, vmprobe

FAKE_VNG = Path(__file__).parent / "fakevng" / "vng"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in vng, a private KVM cache, a usable-looking /dev/kvm, short deadlines."""
    device = tmp_path / "kvm-device"
    device.touch()
    monkeypatch.setattr(kvm, "KVM_DEVICE", device)
    monkeypatch.setenv("MPRIG_VNG", str(FAKE_VNG))
    monkeypatch.setenv("MPRIG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("MPRIG_BPF_CACHE", raising=False)
    monkeypatch.setenv("FAKE_VNG_LOG", str(tmp_path / "boots.log"))
    monkeypatch.setenv("MPRIG_VM_KVM_BOOT_TIMEOUT", "2")
    monkeypatch.delenv(kvm.KVM_ENV, raising=False)
    monkeypatch.setattr(vm, "BOOT_LOCK", tmp_path / "boot.lock")
    return tmp_path


def boots(tmp: Path) -> list[str]:
    return (tmp / "boots.log").read_text().split()


def cached(tmp: Path) -> dict[str, object]:
    return dict(json.loads((tmp / "cache" / "kvm.json").read_text()))


def run(argv: list[str], timeout: float | None = None) -> int:
    return vm.run_in_vm(argv, [], timeout=timeout)


def test_a_kvm_guest_that_never_boots_falls_back_to_emulation(
    fake: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_VNG_KVM", "hangs")
    assert run(["sh", "-c", "echo inside; exit 3"]) == 3
    assert boots(fake) == ["kvm", "tcg"]
    entry = cached(fake)
    assert (entry["usable"], entry["key"]) == (False, kvm.host_key())
    assert "did not reach userspace within 2 s" in str(entry["reason"])
    out, err = capfd.readouterr()
    assert out.splitlines() == ["inside"]
    assert "KVM is not usable here: the guest did not reach userspace within 2 s" in err
    # The next campaign believes the cache: one boot, straight to software emulation.
    assert run(["true"]) == 0
    assert boots(fake) == ["kvm", "tcg", "tcg"]


def test_a_kvm_qemu_that_aborts_is_named_in_the_reason(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VNG_KVM", "aborts")
    assert run(["true"]) == 0
    assert boots(fake) == ["kvm", "tcg"]
    assert "failed to set MSR 0x10a" in str(cached(fake)["reason"])


def test_a_kvm_guest_that_boots_is_recorded_usable(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VNG_KVM", "boots")
    assert run(["true"]) == 0
    assert (boots(fake), cached(fake)["usable"]) == (["kvm"], True)
    assert kvm.answer().usable is True


def test_the_probe_boots_a_guest_and_says_no_when_it_never_runs(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VNG_KVM", "hangs")
    answer = vm.probe_kvm(deadline=2)
    assert (answer.usable, answer.source) == (False, "cache")
    assert "did not reach userspace within 2 s" in answer.reason
    monkeypatch.setenv("FAKE_VNG_KVM", "boots")
    assert vm.probe_kvm(deadline=5).usable is True


def test_the_cache_is_keyed_to_what_can_change_the_answer(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kvm.record(False, "did not boot")
    assert kvm.answer().usable is False
    monkeypatch.setattr(kvm, "qemu_version", lambda: "QEMU emulator version 99.0")
    assert (kvm.answer().usable, kvm.answer().source) == (None, "unknown")


def test_overrides_win_and_forced_kvm_does_not_fall_back(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kvm.record(False, "did not boot")
    monkeypatch.setenv(kvm.KVM_ENV, "1")
    assert kvm.answer().usable is True
    monkeypatch.setenv("FAKE_VNG_KVM", "hangs")
    with pytest.raises(MprigError, match="KVM was forced"):
        run(["true"])
    assert boots(fake) == ["kvm"]
    monkeypatch.setenv(kvm.KVM_ENV, "0")
    assert run(["true"]) == 0
    assert boots(fake) == ["kvm", "tcg"]


def test_a_guest_that_stops_beating_is_stopped(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_VNG_KVM", "freezes")
    monkeypatch.setenv("MPRIG_VM_STALE_AFTER", "2")
    with pytest.raises(MprigError, match="stopped answering: no heartbeat"):
        run(["true"])


def test_the_run_deadline_stops_the_vm(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kvm.KVM_ENV, "0")
    with pytest.raises(MprigError, match="ran past its deadline of 2 s"):
        run(["sleep", "30"], timeout=2)


PARENT = """
import sys
from pathlib import Path
from mprig.rig import kvm, vm
kvm.KVM_DEVICE = Path(sys.argv[1])
print("printed before the VM", flush=True)
sys.exit(vm.run_in_vm(["sh", "-c", "echo guest-out; echo guest-err >&2"], []))
"""


def test_a_redirected_log_keeps_the_lines_printed_before_the_vm(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VNG_KVM", "aborts")
    log = fake / "run.log"
    with open(log, "w") as f:
        code = subprocess.run(
            [sys.executable, "-c", PARENT, str(fake / "kvm-device")],
            stdout=f,
            stderr=subprocess.STDOUT,
            check=False,
            env={**os.environ, "MPRIG_VM_BOOT_LOCK": str(fake / "lock")},
        ).returncode
    lines = log.read_text().splitlines()
    assert code == 0
    assert lines[0] == "printed before the VM"
    assert "guest-out" in lines and "guest-err" in lines
    assert any("booting the VM with software emulation" in ln for ln in lines)
    assert not any("failed to set MSR" in ln for ln in lines if not ln.startswith("mprig:"))


def test_a_guest_line_on_stderr_is_kept_while_the_stdout_thread_lags(
    tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    """The two copying threads run at their own pace: here stderr is read to its end before
    stdout's marker is (a redirected log lost guest-err this way, 1 in a suite run at 0.25
    CPU). Before its marker a pipe's lines are QEMU's and go to the console log."""
    from mprig.rig import vmboot

    with open(tmp_path / "console.log", "ab") as log:
        console = vmboot.Console(log, to_log_only=False)
        (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
        readers = os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb")
        console.start(*readers)
        marker = vmboot.READY_MARKER + b"\n"
        os.write(err_w, b"qemu: booting\n" + marker + b"guest-err\n")
        os.close(err_w)
        console._threads[1].join(10)  # stderr copied to its end; stdout not started yet
        os.write(out_w, b"SeaBIOS\n" + marker + b"guest-out\n")
        os.close(out_w)
        console.join()
        for reader in readers:
            reader.close()
    out, err = capfdbinary.readouterr()
    assert (out, err) == (b"guest-out\n", b"guest-err\n")
    assert (tmp_path / "console.log").read_bytes().splitlines() == [b"qemu: booting", b"SeaBIOS"]


def test_inside_the_vm_the_mode_names_the_real_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(vmprobe.IN_VM_ENV, "1")
    mode, why = vmprobe.choose_mode("native")
    assert (mode, why.startswith("inside the campaign VM")) == ("native", True)


def test_the_vm_deadline_grows_with_the_plan() -> None:
    from mprig.campaign import plan, spec
    from mprig.cli.cmd_run import CAMPAIGN_ALLOWANCE_S, RUN_ALLOWANCE_S, vm_deadline
    from mprig.run.run_attempt import RETRIES

    smoke = plan.expand(spec.load_campaign("experiments/smoke.yaml"))
    per_run = smoke[0].traffic.duration_s + RUN_ALLOWANCE_S
    assert vm_deadline(smoke) == CAMPAIGN_ALLOWANCE_S + 2 * len(smoke) * per_run * (1 + RETRIES)
    doubled = smoke + smoke
    assert vm_deadline(doubled) - CAMPAIGN_ALLOWANCE_S == 2 * (
        vm_deadline(smoke) - CAMPAIGN_ALLOWANCE_S
    )
    # A full paper profile (2.5 h of traffic alone) fits; the old fixed cap was one hour.
    full = plan.expand(spec.load_campaign("experiments/papers/000-table1-full.yaml"))
    planned = sum(r.traffic.duration_s for r in full)
    assert vm_deadline(full) > 2 * planned > 3600


def test_the_guest_keeps_its_bpf_builds_in_a_host_directory_between_boots(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # under emulation a build costs about half a minute of clang; the guest's /tmp is new at
    # every boot, so the objects live on the host, mounted read-write at the same path
    monkeypatch.setenv("FAKE_VNG_ARGV", str(fake / "argv.jsonl"))
    seen = fake / "seen"
    for _ in range(2):
        assert run(["sh", "-c", f'echo "$MPRIG_BPF_CACHE" >> {seen}']) == 0
    cache = str(fake / "cache" / "bpf")
    assert seen.read_text().split() == [cache, cache]
    for line in (fake / "argv.jsonl").read_text().splitlines():
        argv = json.loads(line)
        assert argv[argv.index(cache) - 1] == "--rwdir"


def test_without_a_writable_bpf_cache_the_guest_builds_in_its_own_tmp(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (fake / "file").write_text("")
    monkeypatch.setenv("MPRIG_BPF_CACHE", str(fake / "file" / "bpf"))  # cannot be made
    monkeypatch.setenv("FAKE_VNG_ARGV", str(fake / "argv.jsonl"))
    assert vm.bpf_cache() is None
    assert run(["true"]) == 0
    assert str(fake / "file" / "bpf") not in (fake / "argv.jsonl").read_text()
    script = vm._guest_script(["true"], fake / "status", fake, vm.bpf_cache())
    assert "MPRIG_BPF_CACHE" not in script
