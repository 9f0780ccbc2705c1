"""Where the programs mprig runs are: the venv's bin first, then PATH and the sbin
directories (ip, tc, sshd live in /usr/sbin, which a user's PATH often lacks).

The lowest piece shared by the health check (mprig.cli.doctor) and the parts that run tools
(mprig.stack.bpfcc), so neither imports the other.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

SBIN = ":/usr/local/sbin:/usr/sbin:/sbin"


def which(tool: str) -> str | None:
    """A tool in the venv's bin, on PATH, or in the sbin directories."""
    local = Path(sys.executable).parent / tool
    if local.exists():
        return str(local)
    return shutil.which(tool, path=os.environ.get("PATH", "") + SBIN)
