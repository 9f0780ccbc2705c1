"""The interface between the runner and the machines of a rig (virtual or lab).

Every host is reached the same way: over SSH with connection multiplexing. The virtual rig
and a lab inventory both produce a `Rig`; the runner only sees this module's types.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import IO, Any, Protocol

# A Linux interface name (IFNAMSIZ - 1 characters, no slash or space), and not one that
# captures more than a data interface.
IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:@][A-Za-z0-9_.:@-]{0,14}$")
NOT_DATA = {"any", "lo"}


def check_interface(name: str) -> str:
    """`name` if it can be a data interface; ValueError otherwise (`any`, `lo`, a name
    tcpdump would read as an option, or no Linux interface name)."""
    if name in NOT_DATA or not IFNAME_RE.match(name):
        raise ValueError(
            f"{name!r} is not a data interface name (1-15 of A-Z a-z 0-9 _ . : @ -, not"
            " starting with -; never any or lo)"
        )
    return name


@dataclass(frozen=True)
class Result:
    """Outcome of a command on a host."""

    argv: tuple[str, ...]  # the command as run (already quoted for the remote shell)
    returncode: int
    stdout: str
    stderr: str
    seconds: float  # wall time


class Background(Protocol):
    """A long-running command on a host (tcpdump, iperf3 -s, the ss sampler)."""

    def stop(self, *, signal: str = "INT", timeout: float = 5.0) -> Result:
        """Signal the command, wait for it to exit, return its outcome."""
        ...

    def wait(self, timeout: float) -> Result:
        """Wait for a natural exit; raises HostError on timeout."""
        ...


class Host(Protocol):
    """One machine of a rig, reached over SSH."""

    name: str  # inventory name: client, server, ap, cell, r3 ...

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 30.0,
        check: bool = True,
        input: bytes | None = None,
    ) -> Result:
        """Run argv (each element quoted with shlex.quote) and wait; HostError on failure."""
        ...

    def script(self, text: str, *, timeout: float = 30.0) -> Result:
        """Run a bash script and wait (over a session kept open between calls)."""
        ...

    def start(self, argv: Sequence[str], *, log: str) -> Background:
        """Start argv in the background; its stdout and stderr go to the remote file `log`."""
        ...

    def fetch(self, remote: str, local: FsPath) -> None:
        """Copy a remote file to a local path."""
        ...

    def read_tar(
        self, directory: str, names: Sequence[str], consume: Callable[[IO[bytes]], None]
    ) -> None:
        """Hand `consume` a tar of the named files of a remote directory, as a stream."""
        ...

    def close(self) -> None:
        """End the long-lived session, if one is open (a later call opens a new one)."""
        ...


@dataclass(frozen=True)
class PathLink:
    """Where one spec path lives on the rig."""

    name: str  # spec path name
    kind: str  # wifi | cellular | wired
    client_if: str  # client interface, e.g. wlan0, wwan0, eth1
    client_addr: str  # client address on this path
    router: str  # host that impairs this path (ap, cell, r3 ...)
    router_client_if: str  # router interface facing the client (egress = download)
    router_server_if: str  # router interface facing the server (egress = upload)
    engine: str = "netem"  # what carries the client link: netem, or ns3 (TAPs, rig/ns3link.py)
    family: str = "ipv4"  # ipv4 or ipv6: the family of client_addr (mprig/rig/netns6.py)


@dataclass(frozen=True)
class Rig:
    """A rig ready for runs."""

    name: str  # rig name; virtual rig namespaces are mprig-<name>-<host>
    hosts: dict[str, Host]  # by inventory name; always has "client" and "server"
    paths: tuple[PathLink, ...]
    server_addr: str  # address iperf3 and bulk transfers connect to
    mode: str  # "lab", "virtual-native" or "virtual-vm"
    # host -> its data interfaces, where captures run (a lab inventory's
    # mprig_data_interfaces; empty on a virtual rig, whose layout says them)
    data_ifs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Wi-Fi path name -> mprig.rig.attenuator.RadioPath: the lab paths whose distance an
    # attenuator sets (they get no netem)
    attenuators: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        """End every host's long-lived session."""
        for host in self.hosts.values():
            host.close()
