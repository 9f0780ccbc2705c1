"""An installed mprig works without a checkout: the wheel carries playbooks/, inventory/,
kernel-configs/ and experiments/ (under mprig/data/), and its `mprig` validates a shipped
campaign from a directory outside the checkout.

The wheel is built from a copy of the working tree's files (tracked and new, not ignored),
offline: no build isolation, the venv's setuptools (the `dev` extra). It is installed with
--no-deps --no-index into a fresh venv that reaches the test venv's dependencies through a
.pth line (never the checkout, and never mprig's editable finder, which only a site
directory's own .pth would start).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from mprig import datafiles

ROOT = Path(__file__).resolve().parents[2]
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "mprig", "collectors")
BUILD_INPUTS += ("reports", *datafiles.FOLDERS)


def run(argv: list[str], cwd: Path, timeout: float = 240) -> str:
    """stdout of argv, which must succeed (its output is the failure message otherwise)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL")}
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout


def project_files(*folders: str) -> list[str]:
    """The working tree's files under `folders`: tracked and new, not ignored, not deleted."""
    out = run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *folders],
        ROOT,
    )
    return sorted(f for f in set(out.split("\0")) if f and (ROOT / f).is_file())


def copy_tree(dest: Path) -> None:
    for name in project_files(*BUILD_INPUTS):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes((ROOT / name).read_bytes())


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel built from this tree installed (deps from the test venv)."""
    tmp = tmp_path_factory.mktemp("install")
    copy_tree(tmp / "src")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", "dist", "./src"],
        tmp,
    )
    (wheel,) = (tmp / "dist").glob("mprig-*.whl")
    run([sys.executable, "-m", "venv", "--without-pip", "venv"], tmp)
    python = tmp / "venv" / "bin" / "python"
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp)
    Path(site.strip(), "test-venv-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run([*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)], tmp)
    (tmp / "elsewhere").mkdir()
    return tmp / "venv"


@pytest.mark.slow
def test_the_installed_mprig_reads_its_data_from_the_wheel(venv: Path) -> None:
    shown = run([str(venv / "bin" / "python"), "-c", SHOW], venv.parent / "elsewhere")
    package, root, core = shown.split()
    assert Path(package).is_relative_to(venv) and Path(core).is_relative_to(venv)
    assert Path(root) == Path(package).parent / "data"
    # pip byte-compiles every .py it installs (the Ansible callback plugin too): not shipped
    installed = [p for p in Path(root).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    shipped = sorted(str(p.relative_to(root)) for p in installed)
    assert shipped == project_files(*datafiles.FOLDERS)


SHOW = (
    "import mprig, collectors._core as c; from mprig import datafiles as d; "
    "print(mprig.__file__, d.ROOT, c.__file__)"
)


@pytest.mark.slow
def test_the_installed_command_answers_help_and_validates_a_shipped_campaign(venv: Path) -> None:
    elsewhere = venv.parent / "elsewhere"
    mprig = str(venv / "bin" / "mprig")
    assert "validate" in run([mprig, "--help"], elsewhere)
    (root,) = list((venv / "lib").glob("python*/site-packages/mprig/data"))
    smoke = root / "experiments" / "smoke.yaml"
    assert run([mprig, "validate", str(smoke)], elsewhere).splitlines() == [
        f"OK {smoke}: 6 runs",
        "  checked at run time: congestion controls cubic available (BPF ones built); every"
        " sysctl accepted by the hosts' kernel",
    ]


def test_a_checkout_is_preferred_to_the_installed_copy(tmp_path: Path) -> None:
    checkout, shipped = tmp_path / "checkout", tmp_path / "checkout" / "mprig" / "data"
    assert datafiles.find_root(checkout, shipped) == shipped
    (checkout / "playbooks").mkdir(parents=True)
    (checkout / "playbooks" / "site.yml").write_text("- hosts: all\n")
    assert datafiles.find_root(checkout, shipped) == checkout
    assert datafiles.ROOT == ROOT
