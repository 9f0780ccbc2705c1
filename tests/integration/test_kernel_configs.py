"""kernel-configs/: every fragment survives merge_config.sh + olddefconfig in a real kernel tree.

The tree is Debian's linux-source package, extracted once per machine into
/var/cache/mprig/linux-source (override with MPRIG_KERNEL_CACHE) and reused by later runs.
The multipath-tcp.org fragment names symbols that only exist in that out-of-tree kernel, so it
cannot be merged into mainline: its test checks the fragment lists each required symbol.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "kernel-configs"
TARBALLS = sorted(Path("/usr/src").glob("linux-source-*.tar.xz"))
BASE_CONFIGS = sorted(Path("/boot").glob("config-*"))
CACHE = Path(os.environ.get("MPRIG_KERNEL_CACHE", "/var/cache/mprig/linux-source"))
LINE = re.compile(r"^(CONFIG_[A-Z0-9_]+)=(.+)$")

needs_source = pytest.mark.skipif(
    not TARBALLS or not BASE_CONFIGS,
    reason="needs Debian's linux-source package and a /boot/config-* (make setup installs them)",
)


def symbols(fragment: Path) -> dict[str, str]:
    """The CONFIG_X=value lines of a fragment or .config."""
    text = fragment.read_text()
    return {m[1]: m[2] for m in map(LINE.match, text.splitlines()) if m}


def extracted_tree() -> Path:
    """The linux-source tree, extracted on first use under a lock so parallel runs wait."""
    tarball = TARBALLS[-1]
    tree = CACHE / tarball.name.removesuffix(".tar.xz")
    stamp = CACHE / f"{tree.name}.extracted"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == str(tarball.stat().st_mtime_ns):
            return tree
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["tar", "-xf", str(tarball), "-C", str(CACHE)], check=True)
        stamp.write_text(str(tarball.stat().st_mtime_ns))
    return tree


def merged_config(tree: Path, fragment: Path, out: Path) -> dict[str, str]:
    """Merge fragment onto the newest /boot config in a separate O= build dir, return .config."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(BASE_CONFIGS[-1], out / ".config")
    subprocess.run(
        [str(tree / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(out),
         str(out / ".config"), str(fragment)],
        cwd=tree, check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        ["make", "-s", f"O={out}", "olddefconfig"], cwd=tree, check=True, capture_output=True
    )
    return symbols(out / ".config")


@needs_source
def test_upstream_fragment_survives_olddefconfig(tmp_path: Path) -> None:
    fragment = CONFIGS / "upstream-mptcp.config"
    wanted = symbols(fragment)
    merged = merged_config(extracted_tree(), fragment, tmp_path / "build")
    lost = {name: (value, merged.get(name)) for name, value in wanted.items()}
    lost = {name: pair for name, pair in lost.items() if pair[0] != pair[1]}
    assert lost == {}, "wanted vs got after olddefconfig"
    assert len(wanted) >= 30


def upstream_series() -> list[Path]:
    """The upstream patches in `series` order (which must list every patch file)."""
    patches = CONFIGS / "patches" / "upstream"
    series = [line for line in (patches / "series").read_text().splitlines() if line[:1] not in "#"]
    assert series == [p.name for p in sorted(patches.glob("*.patch"))]
    return [patches / name for name in series]


@needs_source
def test_upstream_patches_apply() -> None:
    """Each patch applies on top of the ones before it in the series, as the kernel role does."""
    series, tree = upstream_series(), extracted_tree()
    assert [p.name for p in series[:2]] == [
        "0001-mptcp-pm-raise-the-address-and-subflow-limit-to-16.patch",
        "0002-mptcp-proactive-scheduler-seed-001.patch",
    ]
    for n, patch in enumerate(series, 1):
        done = subprocess.run(
            ["git", "apply", "--check", "-v", *map(str, series[:n])],
            cwd=tree, capture_output=True, text=True,
        )  # fmt: skip
        assert (patch.name, done.returncode, done.stderr.count("error")) == (patch.name, 0, 0), (
            done.stderr
        )


def patched_copy(tree: Path, dest: Path, series: list[Path]) -> Path:
    """A hard-linked copy of tree with the series applied; patched files get their own inode,
    so the shared extracted tree is never written."""
    subprocess.run(["cp", "-al", str(tree), str(dest)], check=True)
    for patch in series:
        for name in re.findall(r"^\+\+\+ b/(\S+)$", patch.read_text(), re.MULTILINE):
            data = (dest / name).read_bytes()
            (dest / name).unlink()
            (dest / name).write_bytes(data)
    subprocess.run(["git", "apply", *map(str, series)], cwd=dest, check=True)
    return dest


@needs_source
def test_upstream_patches_compile(tmp_path: Path) -> None:
    """net/mptcp/ builds with the series applied and the upstream fragment merged (1-2 min
    on two cores from a fresh build directory): catches a patch that applies but breaks."""
    tree = patched_copy(extracted_tree(), tmp_path / "linux", upstream_series())
    out = tmp_path / "build"
    try:
        merged_config(tree, CONFIGS / "upstream-mptcp.config", out)
        make = ["nice", "-n", "10", "make", "-j2", f"O={out}"]
        prepare = subprocess.run([*make, "prepare"], cwd=tree, capture_output=True, text=True)
        assert prepare.returncode == 0, prepare.stderr[-3000:]
        built = subprocess.run([*make, "net/mptcp/"], cwd=tree, capture_output=True, text=True)
        warnings = [line for line in built.stderr.splitlines() if "net/mptcp/" in line]
        assert (built.returncode, warnings) == (0, []), built.stderr[-3000:]
        assert b"proactive_sched" in (out / "net/mptcp/ctrl.o").read_bytes()
    finally:
        shutil.rmtree(tmp_path / "linux", ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


def test_out_of_tree_fragment_names_every_required_symbol() -> None:
    """For the multipath-tcp.org tree (mptcp_v0.95): not mergeable into mainline, so listed."""
    wanted = symbols(CONFIGS / "multipath-tcp-org.config")
    required = {
        "CONFIG_MPTCP": "y",
        "CONFIG_MPTCP_PM_ADVANCED": "y",
        "CONFIG_MPTCP_FULLMESH": "y",
        "CONFIG_MPTCP_NDIFFPORTS": "y",
        "CONFIG_MPTCP_BINDER": "y",
        "CONFIG_MPTCP_SCHED_ADVANCED": "y",
        "CONFIG_MPTCP_ROUNDROBIN": "y",
        "CONFIG_MPTCP_REDUNDANT": "y",
        "CONFIG_MPTCP_BLEST": "y",
        "CONFIG_TCP_CONG_LIA": "y",
        "CONFIG_TCP_CONG_OLIA": "y",
        "CONFIG_TCP_CONG_BALIA": "y",
        "CONFIG_TCP_CONG_WVEGAS": "y",
        "CONFIG_NET_SCH_NETEM": "m",
    }
    assert {name: wanted.get(name) for name in required} == required


def test_fragments_have_no_duplicate_or_malformed_lines() -> None:
    for fragment in sorted(CONFIGS.glob("*.config")):
        lines = [line for line in fragment.read_text().splitlines() if line and line[0] != "#"]
        bad = [line for line in lines if not LINE.match(line)]
        names = [m[1] for m in map(LINE.match, lines) if m]
        assert (fragment.name, bad, len(names)) == (fragment.name, [], len(set(names)))
