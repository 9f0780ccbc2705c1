"""The machine-wide list of congestion controls a network namespace may select, widened for
virtual-rig campaigns and narrowed again afterwards, even after a campaign killed with -9.

A namespace may only pick an algorithm named in the init namespace's
net.ipv4.tcp_allowed_congestion_control. A virtual-rig campaign adds what its variants use
and must leave the list as it found it. A `finally` block does that on every exit but
SIGKILL, so the additions are also journalled in /run/mprig/allowed-cc/ (tmpfs: it resets on
boot, as the sysctl does):

- `added.json` is what mprig added to the list, beyond what was there before;
- `<pid>.need` is one live campaign's list, held with an flock while the campaign runs.

Whoever enters or leaves takes `.lock`, then removes from the list every added name that no
live campaign needs. A campaign that died without its `finally` holds no flock any more, so
the next campaign (or the next exit of a concurrent one) undoes its additions. Names that were
in the list before mprig touched it are never removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from mprig import fsio
from mprig.errors import ToolMissing
from mprig.stack import bpfcc

ALLOWED_CC = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
JOURNAL = Path(os.environ.get("MPRIG_STATE", "/run/mprig")) / "allowed-cc"


def _read_added(journal: Path) -> list[str]:
    try:
        doc = json.loads((journal / "added.json").read_text())
    except (OSError, ValueError):
        return []
    return [n for n in doc if isinstance(n, str)] if isinstance(doc, list) else []


def _live_needs(journal: Path, own: Path | None) -> tuple[set[str], list[Path]]:
    """The names live campaigns need, and the journals of dead ones (their flock is free)."""
    needs: set[str] = set()
    dead = []
    for path in sorted(journal.glob("*.need")):
        if path == own:
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            needs.update(path.read_text().split())
        else:
            dead.append(path)
        finally:
            os.close(fd)
    return needs, dead


def _narrow(journal: Path, keep: Iterable[str], own: Path | None) -> list[str]:
    """Remove from the list every name mprig added that neither `keep` nor a live campaign
    needs; forget dead campaigns' journals. Returns the names removed. Call under `.lock`."""
    needs, dead = _live_needs(journal, own)
    needs.update(keep)
    added = _read_added(journal)
    drop = [n for n in added if n not in needs]
    if drop:
        allowed = ALLOWED_CC.read_text().split()
        with contextlib.suppress(OSError):
            ALLOWED_CC.write_text(" ".join(n for n in allowed if n not in drop))
        fsio.write_json(journal / "added.json", [n for n in added if n not in drop])
    for path in dead:
        path.unlink(missing_ok=True)
    return drop


@contextlib.contextmanager
def _journal_lock(journal: Path) -> Iterator[None]:
    journal.mkdir(parents=True, exist_ok=True, mode=0o700)
    with (journal / ".lock").open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def allow(names: Iterable[str], say: Callable[[str], None] | None = None) -> Iterator[None]:
    """Let the virtual rig's namespaces select `names` while the block runs.

    mprig's BPF algorithms (mprig.stack.bpfcc: prr, door ...) are built and registered
    first, machine-wide. Additions a campaign killed earlier left behind are undone on
    entry (`say` names them)."""
    names = list(dict.fromkeys(names))
    bpfcc.ensure_loaded(names)
    journal = JOURNAL
    own = journal / f"{os.getpid()}.need"
    with _journal_lock(journal):
        leaked = _narrow(journal, names, own)
        if leaked and say:
            say(f"a campaign killed before it ended had left {' '.join(leaked)} in the "
                "machine-wide net.ipv4.tcp_allowed_congestion_control; removed")  # fmt: skip
        before = ALLOWED_CC.read_text().split()
        wanted = [n for n in names if n not in before]
        for name in wanted:
            subprocess.run(["modprobe", "-q", f"tcp_{name}"], capture_output=True, check=False)
        fsio.write_text(own, " ".join(names) + "\n")
        hold = own.open("r")
        fcntl.flock(hold, fcntl.LOCK_EX)
        if wanted:
            # journalled before the list changes: a crash between the two leaves a name to
            # remove that is not there, which is harmless
            fsio.write_json(journal / "added.json", [*_read_added(journal), *wanted])
            try:
                ALLOWED_CC.write_text(" ".join([*before, *wanted]))
            except OSError as e:
                _narrow(journal, (), own)
                own.unlink(missing_ok=True)
                hold.close()
                raise ToolMissing(
                    f"congestion control {', '.join(wanted)} is not available on this kernel "
                    f"({e.strerror}); see net.ipv4.tcp_available_congestion_control"
                ) from None
    try:
        yield
    finally:
        with _journal_lock(journal):
            own.unlink(missing_ok=True)
            hold.close()
            _narrow(journal, (), own)
