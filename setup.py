"""Builds the compiled parts (the collectors' core, mprig's pcapng join) and puts the data
folders into the wheel; everything else is declared in pyproject.toml."""

from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

# What an installed mprig needs beside its code (mprig.datafiles.FOLDERS finds them).
FOLDERS = ("playbooks", "inventory", "kernel-configs", "experiments")
SKIPPED = ("__pycache__", ".pyc", ".retry")


class BuildWithDataFolders(build_py):
    """build_py, plus a copy of FOLDERS under mprig/data/ in the wheel (an editable install
    reads them from the checkout)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for folder in FOLDERS:
            for src in sorted(Path(folder).rglob("*")):
                if src.is_file() and not any(s in str(src) for s in SKIPPED):
                    dest = Path(self.build_lib, "mprig", "data", src)
                    self.mkpath(str(dest.parent))
                    self.copy_file(str(src), str(dest))


setup(
    cmdclass={"build_py": BuildWithDataFolders},
    ext_modules=[
        Extension(
            "collectors._core",
            sources=["collectors/_core.c"],
            libraries=["crypto"],  # OpenSSL's EVP digests (MPTCP tokens); Debian libssl-dev
            extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wextra"],
        ),
        Extension(
            "mprig._pcapmerge",
            sources=["mprig/_pcapmerge.c"],
            extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wextra"],
        ),
    ],
)
