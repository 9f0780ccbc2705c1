"""CPU per sample of the ss sampler (mprig/run/ss_agent.py) against its peer, `ss -tinHM`
run once per sample as the old bash sampler did, both in the same run.

    .venv/bin/python -m bench.ss_sampler [--samples 500] [--vm]

Needs root: a namespace holding one idle MPTCP connection on loopback (its two subflows,
its two MPTCP sockets). Each side
takes SAMPLES samples to /dev/null: the peer as `for ...; do ss ...; done` in one bash, the
sampler with a 1 ms interval until it has written SAMPLES headers; CPU is user + system
time of the children (startup included, spread over the samples); then what a start
costs, and how a sample's CPU splits between its netlink requests (the kernel) and
Python's parsing and printing. Target: the sampler
costs at most half of the peer per sample natively, where the exec is cheap. Both run in a
namespace built as a rig builds its hosts (mprig/rig/netns.py: a 1024-bucket socket hash
of its own); the split is also given in a namespace sharing the kernel's hash (262144
buckets on a 24 GB host), every dump's walk of which cost about 2 ms (the sampler walks it
once a sample, ss twice). `--vm` runs the same inside the campaign VM (the guest mprig's
campaigns run in), where an exec and ss's 17 shared libraries cost 0.3 s under software
emulation: the case the sampler is for.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
import uuid

from mprig.rig import netns
from mprig.run import capture

TARGET_RATIO = 0.5
PORT = 5201
HOLD = f"""
import socket, time
a = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
a.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
a.bind(("127.0.0.1", {PORT})); a.listen(4)
c = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
c.connect(("127.0.0.1", {PORT})); s, _ = a.accept()
c.sendall(bytes(1 << 20)); s.recv(1 << 16)
print("ready", flush=True); time.sleep(600)
"""


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def peer(ns: str, samples: int) -> float:
    loop = f'for ((i = 0; i < {samples}; i++)); do ss -tinHM "$1"; done'
    flt = f"( sport = :{PORT} or dport = :{PORT} )"
    before = children_cpu()
    subprocess.run(["ip", "netns", "exec", ns, "bash", "-c", loop, "peer", flt],
                   stdout=subprocess.DEVNULL, check=True)  # fmt: skip
    return (children_cpu() - before) / samples


def sampler(ns: str, samples: int) -> float:
    argv = ["ip", "netns", "exec", ns, *capture.ss_sampler_argv(0.001, ports=[PORT])]
    before = children_cpu()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE)
    assert p.stdout is not None
    seen = 0
    while seen < samples:
        line = p.stdout.readline()
        if not line:
            raise SystemExit("bench.ss_sampler: the sampler ended early")
        seen += line.startswith(b"# ")
    p.terminate()
    p.communicate()
    return (children_cpu() - before) / samples


# In the namespace, in one process: a sample's CPU and the part of it its netlink requests
# take (the kernel's walk and the copy), the rest being Python's parsing and printing.
SPLIT = """
import sys, time
ns = {"__name__": "ss_agent"}
exec(compile(sys.argv[1], "ss_agent", "exec"), ns)
sm, n = ns["Sampler"]({int(sys.argv[3])}), int(sys.argv[2])
t = time.process_time()
for _ in range(n):
    sm.sample()
whole = (time.process_time() - t) / n
t = time.process_time()
for _ in range(n):
    sm.tcp(); sm.dump(2, 262); sm.dump(10, 262)
print(whole, (time.process_time() - t) / n)
"""


def split(ns: str, samples: int) -> tuple[float, float]:
    """CPU seconds of one sample, and of its requests alone."""
    argv = ["ip", "netns", "exec", ns, sys.executable, "-I", "-S", "-c", SPLIT,
            capture.ss_source(), str(samples), str(PORT)]  # fmt: skip
    whole, requests = subprocess.run(
        argv, capture_output=True, text=True, check=True
    ).stdout.split()
    return float(whole), float(requests)


def hold(ns: str) -> subprocess.Popen[str]:
    """The idle MPTCP connection in `ns` (loopback up first)."""
    subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
    p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", HOLD],
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert p.stdout is not None
    if p.stdout.readline().strip() != "ready":
        raise SystemExit("bench.ss_sampler: no MPTCP connection in the namespace")
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=500, help="a 50 s run at 0.1 s")
    ap.add_argument("--vm", action="store_true", help="inside the campaign VM")
    args = ap.parse_args()
    if args.vm:
        from mprig.rig import vm

        inner = [sys.executable, "-m", "bench.ss_sampler", "--samples", str(args.samples)]
        return vm.run_in_vm(inner, [], timeout=1800)
    if os.geteuid() != 0:
        print("bench.ss_sampler: needs root (a network namespace); skipped", file=sys.stderr)
        return 0
    # as a rig builds its hosts (mprig/rig/netns.py): `own` from `shared`, with a socket hash
    # of its own; `shared` shares the kernel's, as every namespace did before
    tag = uuid.uuid4().hex[:6]
    shared, own = f"mprig-bench-ss-{tag}", f"mprig-bench-ss-{tag}-own"
    netns.add_namespace(shared)
    holds = []
    try:
        if netns.own_hash_parent(shared) is None:
            raise SystemExit("bench.ss_sampler: this kernel has no per-namespace socket hash")
        netns.add_namespace(own, shared)
        holds = [hold(shared), hold(own)]
        time.sleep(0.2)
        ss_s, agent_s = peer(own, args.samples), sampler(own, args.samples)
        start_s = sampler(own, 1) - agent_s  # one sample's CPU beyond the steady cost
        whole_s, requests_s = split(own, args.samples)
        whole_shared_s, requests_shared_s = split(shared, args.samples)
        kernels = -int(netns.in_ns(shared, "sysctl", "-n", "net.ipv4.tcp_ehash_entries"))
    finally:
        for h in holds:
            h.kill()
            h.wait()
        for ns in (own, shared):
            subprocess.run(["ip", "netns", "del", ns], check=False)
    ratio = agent_s / ss_s
    ok = ratio <= TARGET_RATIO
    print(f"ss per sample {ss_s * 1e3:.2f} ms CPU, the sampler {agent_s * 1e3:.2f} ms "
          f"({args.samples} samples each): ratio {ratio:.3f} (target <= {TARGET_RATIO}) "
          f"{'ok' if ok else 'MISSED'}")  # fmt: skip
    print(f"the sampler: start {start_s * 1e3:.0f} ms CPU (ip netns exec, Python, the "
          f"source compiled); a sample in one process {whole_s * 1e3:.2f} ms, of which its "
          f"netlink requests {requests_s * 1e3:.2f} ms")  # fmt: skip
    print(f"in a namespace sharing the kernel's socket hash ({kernels} buckets, "
          f"{netns.EHASH_ENTRIES} in a rig host's own): a sample {whole_shared_s * 1e3:.2f} "
          f"ms, its requests {requests_shared_s * 1e3:.2f} ms")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
