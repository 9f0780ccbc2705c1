"""Both ends of the application workloads, sent to rig hosts as `python3 -c <this file>
MODE ROLE ADDR PORT MPTCP OUT CONFIG [BIND]` (mprig/run/apps.py builds the argv).

Self-contained on purpose (a lab host has Python, not mprig). ROLE is listen (the server)
or connect (the client, from BIND when given); MPTCP 1 opens IPPROTO_MPTCP sockets; CONFIG
is one JSON object (mprig/run/apps.py agent_config); OUT is the file this end writes.

    requests-server  answer requests until stopped (TERM); OUT: {requests, bytes,
                     connections} served, rewritten after every connection
    requests-client  send CONFIG.count requests of request_bytes, each asking for a size
                     drawn from CONFIG.response with CONFIG.seed, for at most duration_s;
                     OUT: one JSON line per request {seq, bytes, start_ns, time_s, ok[, error]}
    cbr-send         write frames of frame_bytes at fps, each stamped with its number and
                     scheduled send time, until `frames` or duration_s + deadline_ms;
                     OUT: {frames, sent, frame_bytes, fps}
    cbr-recv         read whole frames until the sender ends or duration_s + deadline_ms +
                     1 s have passed; OUT: one JSON line per frame {seq, sched_ns, recv_ns}

Both ends share a clock (namespaces of one machine, or hosts synchronised by PTP/NTP).
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import socket
import struct
import sys
import time
from typing import Any, TextIO

IPPROTO_MPTCP = 262
HEADER = struct.Struct("!QQ")  # request: number, size asked; frame: number, scheduled ns
CHUNK = 1 << 16
RECV_SLACK_S = 1.0  # the CBR receiver reads this long past the last frame's deadline


def response_sizes(dist: dict[str, Any], count: int, seed: int) -> list[int]:
    """`count` response sizes drawn from `dist` (a traffic.requests.response mapping) by a
    generator seeded with `seed`: the same seed gives the same sizes in the same order."""
    rng, kind = random.Random(seed), dist["dist"]
    if kind == "fixed":
        return [int(dist["bytes"])] * count
    if kind == "choice":
        return [int(s) for s in rng.choices(dist["sizes"], weights=dist.get("weights"), k=count)]
    if kind == "lognormal":
        mu, sigma = math.log(dist["median_bytes"]), dist["sigma"]
        draws = [rng.lognormvariate(mu, sigma) for _ in range(count)]
    else:  # pareto: scale min_bytes, shape alpha
        draws = [dist["min_bytes"] * rng.paretovariate(dist["alpha"]) for _ in range(count)]
    return [max(1, min(int(dist["max_bytes"]), round(d))) for d in draws]


def _socket(mptcp: bool) -> socket.socket:
    return socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP if mptcp else 0)


def listen(addr: str, port: int, mptcp: bool) -> socket.socket:
    """A listening socket; prints `listening` once it is (the runner waits for the port)."""
    s = _socket(mptcp)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(8)
    print("listening", flush=True)
    return s


def connect(addr: str, port: int, mptcp: bool, bind: str, timeout: float) -> socket.socket:
    """A connection from `bind` (the initial path's address) when given."""
    s = _socket(mptcp)
    try:
        if bind:
            s.bind((bind, 0))
        s.settimeout(timeout)
        s.connect((addr, port))
    except OSError:
        s.close()
        raise
    return s


def recv_exact(conn: socket.socket, n: int) -> bytes | None:
    """n bytes, or None on end of stream before the first byte; EOFError mid-way."""
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            if buf:
                raise EOFError(f"stream ended {len(buf)} bytes into {n}")
            return None
        buf += chunk
    return bytes(buf)


def drain(conn: socket.socket, n: int) -> None:
    """Read and drop exactly n bytes (a response can be larger than memory allows)."""
    buf = bytearray(CHUNK)
    while n > 0:
        got = conn.recv_into(buf, min(n, CHUNK))
        if not got:
            raise EOFError(f"response ended {n} bytes short")
        n -= got


def send_zeros(conn: socket.socket, n: int) -> None:
    zeros = memoryview(bytes(min(n, CHUNK)))
    while n > 0:
        conn.sendall(zeros[: min(n, CHUNK)])
        n -= min(n, CHUNK)


def write_json(path: str, doc: dict[str, Any]) -> None:
    """Replace `path` whole (a TERM between two writes leaves the previous one)."""
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f)
    os.replace(path + ".tmp", path)


def requests_server(listener: socket.socket, out: str, cfg: dict[str, Any]) -> None:
    """Answer each request with the size it asks for, connection after connection."""
    served = {"requests": 0, "bytes": 0, "connections": 0}
    write_json(out, served)
    while True:
        conn, _ = listener.accept()
        served["connections"] += 1
        try:
            while (req := recv_exact(conn, cfg["request_bytes"])) is not None:
                size = HEADER.unpack_from(req)[1]
                send_zeros(conn, size)
                served["requests"] += 1
                served["bytes"] += size
        except (OSError, EOFError):
            pass  # the client gave up on a request (its deadline): it logged why
        conn.close()
        write_json(out, served)


def requests_client(ends: tuple[str, int, bool, str], out: TextIO, cfg: dict[str, Any]) -> None:
    """Every request in turn, logged with its completion time; a failure is logged and the
    next request opens a new connection."""
    sizes = response_sizes(cfg["response"], cfg["count"], cfg["seed"])
    end = time.monotonic() + cfg["duration_s"]
    per_request = cfg["connection"] == "per_request"
    conn = None if per_request else connect(*ends, timeout=cfg["duration_s"])
    pad = bytes(cfg["request_bytes"] - HEADER.size)
    for seq, size in enumerate(sizes):
        row: dict[str, Any] = {"seq": seq, "bytes": size, "start_ns": time.time_ns()}
        left, t0 = end - time.monotonic(), time.perf_counter()
        try:
            if left <= 0:
                raise TimeoutError
            conn = conn or connect(*ends, timeout=left)
            conn.settimeout(left)
            conn.sendall(HEADER.pack(seq, size) + pad)
            drain(conn, size)
            row |= {"time_s": time.perf_counter() - t0, "ok": True}
        except (OSError, EOFError) as e:
            row |= {"time_s": None, "ok": False, "error": _why(e)}
            _close(conn)
            conn = None
        if per_request:
            _close(conn)
            conn = None
        out.write(json.dumps(row) + "\n")
        if cfg["think_ms"] and seq + 1 < len(sizes):
            time.sleep(min(cfg["think_ms"] / 1e3, max(0.0, end - time.monotonic())))
    _close(conn)


def _why(e: BaseException) -> str:
    if isinstance(e, TimeoutError):
        return "deadline: duration_s passed"
    return f"{type(e).__name__}: {e}"


def _close(conn: socket.socket | None) -> None:
    if conn is not None:
        conn.close()


def cbr_send(conn: socket.socket, cfg: dict[str, Any], doc: dict[str, Any]) -> None:
    """Frames on their schedule (late ones as soon as the socket takes them) until all are
    written or the last deadline passed; `doc["sent"]` counts them as they go."""
    size, fps, frames = cfg["frame_bytes"], cfg["fps"], cfg["frames"]
    pad, t0, t0_ns = bytes(size - HEADER.size), time.monotonic(), time.time_ns()
    stop = t0 + cfg["duration_s"] + cfg["deadline_ms"] / 1e3
    try:
        for i in range(frames):
            if (now := time.monotonic()) > stop:
                break
            if (due := t0 + i / fps) > now:
                time.sleep(due - now)
            conn.sendall(HEADER.pack(i, t0_ns + round(i * 1e9 / fps)) + pad)
            doc["sent"] = i + 1
        conn.shutdown(socket.SHUT_WR)
        while conn.recv(CHUNK):
            pass
    except OSError:
        pass  # the receiver stopped reading at its limit and reset the connection


def cbr_recv(conn: socket.socket, out: TextIO, cfg: dict[str, Any]) -> None:
    """Log every whole frame with its arrival time, until the stream ends or the time for
    the last frame's deadline (and a slack) has passed."""
    size = cfg["frame_bytes"]
    stop = time.monotonic() + cfg["duration_s"] + cfg["deadline_ms"] / 1e3 + RECV_SLACK_S
    buf = b""
    while (left := stop - time.monotonic()) > 0:
        conn.settimeout(left)
        try:
            chunk = conn.recv(CHUNK)
        except TimeoutError:
            break
        if not chunk:
            break
        now, buf = time.time_ns(), buf + chunk
        while len(buf) >= size:
            seq, sched = HEADER.unpack_from(buf)
            out.write(json.dumps({"seq": seq, "sched_ns": sched, "recv_ns": now}) + "\n")
            buf = buf[size:]


def main(argv: list[str]) -> None:
    mode, role, addr, port, mptcp, out, cfg_json = argv[:7]
    bind, cfg = (argv[7] if len(argv) > 7 else ""), json.loads(cfg_json)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # files close (and flush) on stop
    ends = (addr, int(port), mptcp == "1", bind)
    if mode == "requests-client":
        with open(out, "w") as f:
            requests_client(ends, f, cfg)
        return
    if role == "listen":
        listener = listen(addr, int(port), mptcp == "1")
        if mode == "requests-server":
            requests_server(listener, out, cfg)
        conn = listener.accept()[0]
    else:
        conn = connect(*ends, timeout=10)
        conn.settimeout(None)
    if mode == "cbr-send":
        doc = {k: cfg[k] for k in ("frames", "frame_bytes", "fps")} | {"sent": 0}
        try:
            cbr_send(conn, cfg, doc)
        finally:
            write_json(out, doc)  # even when stopped: the count so far
    else:
        with open(out, "w") as f:
            cbr_recv(conn, f, cfg)
    conn.close()


if __name__ == "__main__":
    main(sys.argv[1:])
