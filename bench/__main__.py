"""Run every benchmark module in bench/ (each in its own process), in name order."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))
    status = 0
    for name in names:
        print(f"== bench.{name}", flush=True)
        code = subprocess.call([sys.executable, "-m", f"bench.{name}", *sys.argv[1:]],
                               cwd=here.parent)  # fmt: skip
        status = status or code
    return status


if __name__ == "__main__":
    sys.exit(main())
