"""Where mprig's data folders are: playbooks/, inventory/, kernel-configs/, experiments/.

In a checkout (and an editable install) they sit next to the mprig package. A wheel carries
a copy inside the package, under mprig/data/ (setup.py puts it there when it builds), so an
installed `mprig` provisions and runs a campaign without a checkout; `mprig doctor` says
which one is in use.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent  # the project checkout, when mprig runs from one
SHIPPED = PACKAGE / "data"  # the copy a wheel installs
FOLDERS = ("playbooks", "inventory", "kernel-configs", "experiments")  # as in setup.py


def find_root(checkout: Path = CHECKOUT, shipped: Path = SHIPPED) -> Path:
    """The checkout when mprig runs from one (its playbooks/site.yml is there), else the
    copy installed with the package."""
    return checkout if (checkout / "playbooks" / "site.yml").is_file() else shipped


ROOT = find_root()
PLAYBOOKS = ROOT / "playbooks"
INVENTORY = ROOT / "inventory"
KERNEL_CONFIGS = ROOT / "kernel-configs"
EXPERIMENTS = ROOT / "experiments"


def described() -> str:
    """ROOT, and whether it is a checkout or the installed copy."""
    return f"{ROOT} ({'checkout' if ROOT == CHECKOUT else 'installed with mprig'})"
