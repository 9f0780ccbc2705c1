"""The exact commands a run applies, per host, in order: `mprig plan --commands` prints
them and the runner executes them (both read this module, so they cannot drift)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from mprig.campaign import wifi
from mprig.campaign.plan import Run
from mprig.campaign.spec import Path
from mprig.errors import UsageError
from mprig.rig import addr6, layout
from mprig.rig.host import PathLink, Rig
from mprig.run import apps, capture, impair, latency, rbpm_run, timeline, traffic
from mprig.run.bottleneck import setup_commands as bottleneck_setup
from mprig.run.bottleneck import teardown_commands as bottleneck_teardown
from mprig.run.crossflow import background as cross_background
from mprig.run.crossflow import shown as cross_shown
from mprig.stack import knobs, userpm

SERVER_ADDR_PLACEHOLDER = "SERVER_ADDR"  # shown by `plan --commands` when no rig is up
Command = tuple[str, list[str]]  # (host, argv)
# Traffic servers that serve one client and exit (iperf3 -s -1; the bulk, blocks and cbr ends
# accept once); the requests server answers until it is stopped.
ONE_OFF_SERVERS = frozenset({"iperf3", "bulk", "blocks", "cbr"})
SERVER_WAIT_RTTS = 4  # the stop stage's wait for a one-off server, in round trips
SERVER_WAIT_S = (2.0, 30.0)  # ... and its least and most, seconds


@dataclass(frozen=True)
class RunCommands:
    """Every command of one run, grouped by stage."""

    setup: list[Command]  # knobs and endpoints on client and server, netem on routers
    server: Command | None  # the traffic server, started in the background
    client: Command  # the traffic client (its exit ends the traffic phase)
    teardown: list[Command]  # qdiscs removed (failures there are expected and ignored)
    # helpers running beside the traffic, (host, argv, log name): the RBPM controller
    background: list[tuple[str, list[str], str]] = field(default_factory=list)
    # timed agents started beside the traffic client, (host, argv, log name): mprig/run/timeline.py
    timed: list[tuple[str, list[str], str]] = field(default_factory=list)
    # a server that ends by itself once its client is done: the seconds the stop stage gives
    # it to do so before it is signalled (server_wait_s); None: it runs until stopped
    server_wait_s: float | None = None


def remote_root(rig: str) -> str:
    """Where every host of a rig keeps its runs' files: <root>/<run id>/<host>."""
    return f"/tmp/mprig-{rig}"


def remote_dir(rig: str, run_id: str, host: str) -> str:
    """Where a host keeps a run's files until they are fetched."""
    return f"{remote_root(rig)}/{run_id}/{host}"


def pcap_path(rig: str, run_id: str, host: str, interface: str) -> str:
    """Where tcpdump on one of host's data interfaces writes during a run."""
    return f"{remote_dir(rig, run_id, host)}/{host}-{interface}.pcap"


def data_interfaces(rig: Rig) -> dict[str, tuple[str, ...]]:
    """Per host, its data interfaces: the lab inventory's, or the virtual rig's layout."""
    if rig.data_ifs or not rig.mode.startswith("virtual"):
        return rig.data_ifs
    return layout.data_interfaces(rig.paths)


def sender(run: Run) -> str:
    """The host that sends the data (the ss sampler runs there)."""
    return "server" if run.traffic.direction == "download" else "client"


def build(
    run: Run,
    links: tuple[PathLink, ...],
    *,
    server_addr: str = SERVER_ADDR_PLACEHOLDER,
    rig: str = "virtual",
    iperf3_mptcp_flag: bool = False,
    radio_paths: frozenset[str] = frozenset(),
    lab: bool = False,
) -> RunCommands:
    """All commands of a run on a rig whose paths are `links`; `radio_paths` (lab Wi-Fi
    paths whose distance an attenuator sets) get no netem: a real radio is its channel;
    `lab`: the hosts are a lab's (their own file systems, mprig.stack.userpm)."""
    setup = knobs.apply_commands(run.variant, links)
    by_name = {link.name: link for link in links}
    teardown: list[Command] = []
    for path in run.paths:
        if path.name not in by_name:
            raise UsageError(f"path {path.name!r} is not on the rig (rig paths: {list(by_name)})")
        if path.engine == "ns3":
            continue  # the ns-3 engine is the link: no netem (rig/ns3link.py)
        if path.name in radio_paths:
            continue  # the radio and its attenuator are the channel (run.set_attenuation)
        setup += impair.apply_commands(wifi.effective_path(path), by_name[path.name])
        teardown += impair.clear_commands(by_name[path.name])
    bind = knobs.bind_link(run.variant, links).client_addr
    server_addr, listen = addr6.service(server_addr, knobs.used_links(run.variant, links))
    server, client = _traffic(run, server_addr, bind, rig, iperf3_mptcp_flag, listen)
    background = []
    if run.variant.path_manager == "rbpm":
        log = f"{remote_dir(rig, run.run_id, 'client')}/{rbpm_run.LOG}"
        tx = f"{remote_dir(rig, run.run_id, 'server')}/ss.txt"  # the ss sampler's output
        ctl = rbpm_run.controller_argv(run, log, tx)
        background.append(("client", ctl, rbpm_run.STDOUT))
        teardown += rbpm_run.restore_commands(run.variant, links)
    background += userpm.background(run, links, lab)  # mptcpd opens the subflows (userspace PM)
    background += cross_background(run, links, server_addr, partial(remote_dir, rig, run.run_id))
    background += latency.background(run.traffic, [by_name[p.name] for p in run.paths], server_addr)
    setup += bottleneck_setup(run.bottleneck, links)
    teardown += bottleneck_teardown(run.bottleneck, links)
    teardown += timeline.restore_steps(run.timeline, links)
    timed = timeline.agents(run, links, radio_paths)
    wait_s = server_wait_s(run)
    return RunCommands(setup, server, client, teardown, background, timed, wait_s)


def server_wait_s(run: Run) -> float | None:
    """How long the stop stage waits for a one-off traffic server to end by itself before it
    signals it: a few round trips of the run's longest path (iperf3's server writes its JSON
    after an end-of-test exchange with the client, one document more when a TERM cuts in),
    SERVER_WAIT_S at least and at most. None for a server that runs until stopped."""
    if run.traffic.tool not in ONE_OFF_SERVERS:
        return None
    rtt_s = max((_round_trip_ms(run, p) for p in run.paths), default=0.0) / 1000
    least, most = SERVER_WAIT_S
    return min(most, max(least, SERVER_WAIT_RTTS * rtt_s))


def _round_trip_ms(run: Run, path: Path) -> float:
    """A path's largest configured round trip: each direction's delay (or a larger one the
    timeline sets) and jitter, a shared bottleneck's delay both ways."""
    b = run.bottleneck
    shared = 2 * b.delay_ms if b is not None and path.name in b.paths else 0.0
    return shared + sum(_one_way_ms(run, path, d) for d in ("down", "up"))


def _one_way_ms(run: Run, path: Path, direction: str) -> float:
    spec = getattr(path, direction)
    delays = [spec.delay_ms] + [
        e.delay_ms
        for e in run.timeline
        if e.path == path.name and e.direction in (direction, "both") and e.delay_ms is not None
    ]
    return float(max(delays) + spec.jitter_ms)


def _traffic(
    run: Run, server_addr: str, bind: str, rig: str, flag: bool, listen: str
) -> tuple[Command, Command]:
    t, mptcp = run.traffic, run.variant.protocol == "mptcp"
    sdir, cdir = (remote_dir(rig, run.run_id, h) for h in ("server", "client"))
    if t.tool == "iperf3":
        server = traffic.iperf3_server_argv(
            listen, f"{sdir}/iperf3-server.json", mptcp=mptcp, native_flag=flag
        )
        client = traffic.iperf3_client_argv(
            t, server_addr, bind, f"{cdir}/iperf3-client.json", mptcp=mptcp, native_flag=flag
        )
        return ("server", server), ("client", client)
    if t.tool == "blocks":
        return _blocks(run, server_addr, bind, (sdir, cdir))
    if t.tool in apps.TOOLS:
        return apps.commands(run, server_addr, bind, (sdir, cdir))
    if t.bytes is None:
        raise UsageError("traffic: tool bulk needs `bytes`")
    down, n = t.direction == "download", t.bytes
    server = traffic.bulk_argv(
        "listen", server_addr, n, run.seed, mptcp=mptcp, send=down, out=f"{sdir}/bulk-server.json"
    )
    client = traffic.bulk_argv(
        "connect",
        server_addr,
        n,
        run.seed,
        mptcp=mptcp,
        send=not down,
        out=f"{cdir}/bulk-client.json",
        bind=bind,
    )
    return ("server", server), ("client", client)


def _blocks(
    run: Run, server_addr: str, bind: str, dirs: tuple[str, str]
) -> tuple[Command, Command]:
    """The block workload: the server listens, the client connects from the initial path;
    the receiver (client for a download) logs every block, the sender counts them."""
    t, down = run.traffic, run.traffic.direction == "download"
    end = partial(
        traffic.blocks_argv,
        addr=server_addr,
        block_bytes=t.block_bytes or 0,
        interval_ms=t.interval_ms or 0.0,
        duration_s=t.duration_s,
        mptcp=run.variant.protocol == "mptcp",
    )
    server = end("listen", send=down, out=f"{dirs[0]}/{traffic.blocks_file(down)}")
    client = end("connect", send=not down, out=f"{dirs[1]}/{traffic.blocks_file(not down)}")
    return ("server", server), ("client", [*client, bind])


def for_run(
    run: Run,
    links: tuple[PathLink, ...],
    *,
    server_addr: str = SERVER_ADDR_PLACEHOLDER,
    rig: str = "virtual",
    iperf3_mptcp_flag: bool = False,
    data_ifs: dict[str, tuple[str, ...]] | None = None,
) -> list[Command]:
    """The exact (host, argv) list a run applies: knobs and endpoints, netem on each router
    in both directions, capture, traffic server and client, teardown (the RBPM
    controller's source text shown as its file name). Captures run on each data interface
    of a capturing host (`data_ifs`, default the virtual rig's layout)."""
    c = build(run, links, server_addr=server_addr, rig=rig, iperf3_mptcp_flag=iperf3_mptcp_flag)
    ifs = data_ifs or layout.data_interfaces(links)
    caps = [
        (h, capture.tcpdump_argv(pcap_path(rig, run.run_id, h, i), run.capture.snaplen, i))
        for h in (run.capture.hosts if run.capture.enabled else ())
        for i in ifs.get(h, ())
    ]
    snd = sender(run)
    return [
        *c.setup,
        *caps,
        (snd, capture.ss_shown(capture.ss_sampler_argv())),
        *[(h, capture.nstat_argv()) for h in ("client", "server")],
        *([apps.shown(c.server)] if c.server else []),
        *[(h, latency.shown(cross_shown(rbpm_run.shown(argv)))) for h, argv, _ in c.background],
        *[(h, timeline.shown(argv)) for h, argv, _ in c.timed],
        apps.shown(c.client),
        *c.teardown,
    ]
