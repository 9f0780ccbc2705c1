"""What a virtme-ng guest sees of the host's files, and the directories `mprig run --vm`
shares with it so that it sees its inputs.

virtme-ng's init (virtme-ng-init, virtme/guest/virtme-init) mounts fresh file systems over
/run, /var/tmp, /var/log, /var/cache and a few more: host files there are not in the guest
unless shared (`vng --rwdir`). Not /tmp: vng lays an overlay on the host's /tmp (as on
/etc, /usr, /var), so the guest reads the host's files there and its own writes stay in the
guest (make test runs its VM tests from a clone in /tmp, venv included).

A guest takes at most MAX_SHARES shared directories: vng passes each to the guest's init as
three boot variables, and Linux hands init at most 32 (CONFIG_INIT_ENV_ARG_LIMIT); with a
sixth the stock kernel panics "Too many boot env vars" before userspace, and vng exits 255
without a word (measured: 5 boot, 6 and 8 do not).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from mprig.errors import MprigError

GUEST_PRIVATE = tuple(
    Path(os.path.realpath(d))  # /lib/modules is /usr/lib/modules on a merged-/usr Debian
    for d in (
        "/run",
        "/dev/shm",
        "/var/tmp",
        "/var/log",
        "/var/cache",
        "/var/lib/apt",
        "/var/lib/private",
        "/var/lib/sudo",
        "/var/lib/machines",
        "/var/lib/portables",
        "/var/spool/rsyslog",
        "/lib/modules",
    )
)
MAX_SHARES = 5  # vng --rwdir per boot, the VM's exchange directory included


def hidden_in_guest(path: str | Path) -> bool:
    """Whether the guest sees a fresh file system at `path` instead of the host's."""
    p = Path(os.path.realpath(path))
    return any(p == d or d in p.parents for d in GUEST_PRIVATE)


def shares_for(files: Sequence[str | Path], dirs: Sequence[str | Path | None] = ()) -> list[Path]:
    """The host directories a guest must get shared to read `files` and `dirs`: the
    directory of each file and each directory that lies where the guest mounts a fresh file
    system (an input kept under /var/tmp), resolved, each once. The working directory too
    when a file is named relative to it (the guest resolves it from there). MprigError for
    an input directly in such a directory: sharing all of /var/tmp or /run would hide the
    guest's own."""
    wanted = [(str(f), Path(os.path.abspath(f)).parent) for f in files]
    wanted += [(str(d), Path(os.path.abspath(d))) for d in dirs if d is not None]
    if any(not Path(f).is_absolute() for f in files):
        wanted.append(("the working directory", Path.cwd()))
    shared: list[Path] = []
    for name, where in wanted:
        real = Path(os.path.realpath(where))
        if not hidden_in_guest(real):
            continue
        if real in GUEST_PRIVATE:
            raise MprigError(
                f"{name}: the VM mounts a fresh {real} over the host's, so the run could not"
                f" read it there; move it into a directory of its own (mkdir {real}/mine) or"
                f" out of {real}, or run with --no-vm"
            )
        shared.append(real)
    return _outermost(shared)


def _outermost(dirs: Sequence[Path]) -> list[Path]:
    """Each directory once, without those inside another (shared with it)."""
    once = list(dict.fromkeys(dirs))
    return [d for d in once if not any(o in d.parents for o in once)]


def _top(d: Path) -> Path:
    """The directory just below the fresh file system `d` lies in (itself elsewhere)."""
    root = next((r for r in GUEST_PRIVATE if r in d.parents), None)
    return d if root is None else root / d.relative_to(root).parts[0]


def fit_shares(dirs: Sequence[Path], limit: int = MAX_SHARES - 1) -> list[Path]:
    """`dirs` as few shared directories as a boot takes (`limit`: the exchange directory
    is one more): those inside another dropped; if still too many, the inputs under
    /var/tmp (or another fresh file system) shared by their top directory there
    (/var/tmp/c/specs and /var/tmp/c/traces as /var/tmp/c). MprigError when that is not
    enough, naming them."""
    out = _outermost([Path(os.path.realpath(d)) for d in dirs])
    if len(out) > limit:
        out = _outermost([_top(d) for d in out])
    if len(out) > limit:
        raise MprigError(
            f"the VM would need {len(out) + 1} shared directories and boots with at most"
            f" {limit + 1} (Linux hands the guest's init at most 32 boot variables, vng"
            f" spends 3 on each): {', '.join(map(str, out))} and its exchange directory;"
            " keep the campaign, its traces and the archive in one directory, or outside"
            " /var/tmp, /run, /var/cache and /var/log"
        )
    return out
