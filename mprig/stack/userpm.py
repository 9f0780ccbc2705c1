"""The runner's side of `path_manager: userspace`: mptcpd with mprig's plugin on the client
(kernel-configs/mptcpd/mprig_fullmesh.c), which opens the subflows the kernel's userspace
path manager leaves to a daemon; its log in the bundle as mptcpd.log, and the check that
it ran the whole run."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mprig.campaign.plan import Run
from mprig.errors import UsageError
from mprig.rig.host import PathLink
from mprig.stack import knobs

PLUGIN = "mprig_fullmesh"
LOG = "mptcpd.log"  # mptcpd's stderr (--log=stderr): the plugin's every request and answer
MPTCPD = "/usr/libexec/mptcpd"  # Debian's mptcpd package puts the daemon there, off PATH
IFACES_ENV = "MPRIG_FULLMESH_IFACES"  # the plugin's interfaces (never the management one)
READY = f"{PLUGIN}: path manager ready"  # logged once mptcpd listens to MPTCP events
STOPPED = f"{PLUGIN}: stopped"  # logged when mptcpd unloads the plugin on SIGTERM
REPO = Path(__file__).resolve().parents[2]
# On a lab client the plugin is where playbooks/roles/mptcpd_plugin builds it
# (`ansible-playbook playbooks/site.yml -e mptcpd_plugin=true`).
LAB_PLUGIN_DIR = Path("/usr/local/lib/mprig/mptcpd-plugins")


SETUP_HINT = (
    f"is {PLUGIN}.so in its plugin directory? `make mptcpd-plugin` on a virtual rig, "
    "`ansible-playbook playbooks/site.yml -e mptcpd_plugin=true` on a lab"
)


def plugin_dir() -> Path:
    """Where `make mptcpd-plugin` builds the plugin: $MPRIG_MPTCPD_PLUGIN_DIR, else the
    checkout's build/mptcpd-plugins (the virtual rig's hosts share this file system)."""
    return Path(os.environ.get("MPRIG_MPTCPD_PLUGIN_DIR") or REPO / "build" / "mptcpd-plugins")


def mptcpd_argv(ifaces: list[str], directory: Path) -> list[str]:
    """mptcpd with only our plugin, as the default path manager, logging to stderr; `env`
    passes the interfaces (no shell: names reach the daemon as one argument)."""
    return [
        "env",
        f"{IFACES_ENV}={','.join(ifaces)}",
        MPTCPD,
        "--log=stderr",
        f"--plugin-dir={directory}",
        f"--load-plugins={PLUGIN}",
        f"--path-manager={PLUGIN}",
    ]


def used(run: Run) -> bool:
    """Whether the run's variant has mptcpd open its subflows."""
    return run.variant.protocol == "mptcp" and run.variant.path_manager == "userspace"


def background(
    run: Run, links: tuple[PathLink, ...], lab: bool = False
) -> list[tuple[str, list[str], str]]:
    """(host, argv, log) of mptcpd on the client for a userspace-PM variant, else nothing;
    its log is the background command's output file (mptcpd logs to stderr). A virtual
    rig's hosts share this machine's file system, so the plugin is checked here; a LAB
    client has its own, where the mptcpd_plugin role put it (`problem` names the role when
    mptcpd never became ready)."""
    if not used(run):
        return []
    directory = LAB_PLUGIN_DIR if lab else plugin_dir()
    if not lab and not (directory / f"{PLUGIN}.so").is_file():
        raise UsageError(
            f"path_manager userspace needs mprig's mptcpd plugin {directory}/{PLUGIN}.so:"
            " run `make mptcpd-plugin` (or `make setup`)"
        )
    ifaces = [link.client_if for link in knobs.used_links(run.variant, links)]
    return [("client", mptcpd_argv(ifaces, directory), LOG)]


def ready_logs(run: Run, remote: Callable[[str], str]) -> list[tuple[str, str, str]]:
    """(host, log path, text) the runner waits for before the traffic starts: a connection
    opened before mptcpd listens would never get its subflows."""
    return [("client", f"{remote('client')}/{LOG}", READY)] if used(run) else []


def files(run: Run) -> list[str]:
    """The client's remote files that become artifacts: mptcpd's log, as mptcpd.log."""
    return [LOG] if used(run) else []


def doctor_check() -> tuple[bool, str]:
    """Whether path_manager userspace can run here: mptcpd and the built plugin."""
    plugin = plugin_dir() / f"{PLUGIN}.so"
    if not Path(MPTCPD).is_file():
        return False, f"{MPTCPD} missing (apt-get install mptcpd)"
    if not plugin.is_file():
        return False, f"{plugin} missing (make mptcpd-plugin)"
    return True, f"{MPTCPD}, {plugin}"


@dataclass(frozen=True)
class LogSummary:
    """What mptcpd's log says the plugin did in one run."""

    ready: bool  # the plugin saw mptcpd listen to MPTCP events
    stopped: bool  # mptcpd unloaded the plugin on the runner's SIGTERM (it did not die early)
    requested: int  # subflows the plugin asked the kernel for
    refused: int  # requests the kernel answered with an error
    established: int  # subflows the kernel reported established (the MP_JOIN completed)
    errors: tuple[str, ...]  # mptcpd's own error lines


_ADD = re.compile(rf"^{PLUGIN}: token \S+: add subflow .*: (\S.*)$")
_ERROR = re.compile(r"error|failed|fatal|unable", re.IGNORECASE)


def parse_log(text: str) -> LogSummary:
    """Summarise mptcpd's log (the plugin's lines start with its name)."""
    lines = text.splitlines()
    answers = [m.group(1) for line in lines if (m := _ADD.match(line))]
    return LogSummary(
        ready=READY in lines,
        stopped=STOPPED in lines,
        requested=len(answers),
        refused=sum(a != "requested" for a in answers),
        established=sum(f"{PLUGIN}: token " in x and ": subflow established " in x for x in lines),
        errors=tuple(x for x in lines if not x.startswith(PLUGIN) and _ERROR.search(x)),
    )


def problem(staging: Path, run: Run) -> str | None:
    """Why a userspace-PM run's mptcpd did not do its job (None when it did, or when the
    variant runs none): mptcpd must have been ready and running until the runner stopped
    it, with no error of its own."""
    if not used(run):
        return None
    try:
        log = parse_log((staging / LOG).read_text(errors="replace"))
    except OSError as e:
        return f"client: mptcpd's log {LOG} is missing ({e.strerror})"
    if not log.ready or not log.stopped or log.errors:
        said = "; ".join(log.errors[:3]) or "no error logged"
        when = "never became ready" if not log.ready else "exited before the run's end"
        hint = "" if log.ready else f"; {SETUP_HINT}"
        return f"client: mptcpd {when if not log.errors else 'logged errors'} ({said}){hint}"
    return None
