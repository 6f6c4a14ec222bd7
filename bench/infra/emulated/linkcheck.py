"""Measures a link of the emulated cluster: one TCP stream from one host to another, and the
time one message takes after the link was idle (what a training step's small messages meet).

    python -m bench.infra.emulated.linkcheck receive PORT        (on the receiving host)
    python -m bench.infra.emulated.linkcheck send ADDRESS PORT SECONDS
    python -m bench.infra.emulated.linkcheck answer PORT         (on the receiving host)
    python -m bench.infra.emulated.linkcheck ask ADDRESS PORT BYTES REPEATS
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import time

from bench.infra.emulated.network import Cluster, enter

CHUNK = 1 << 16
PORT = 5201


def receive(port: int) -> float:
    """Bytes per second from the first byte received to the last; printed as Mbit/s."""
    with socket.create_server(("0.0.0.0", port)) as server:
        print("listening", flush=True)
        conn, _ = server.accept()
        with conn:
            total, first, last = 0, None, None
            while chunk := conn.recv(CHUNK):
                last = time.perf_counter()
                first = first or last
                total += len(chunk)
    rate = total * 8 / max(last - first, 1e-9) / 1e6 if first else 0.0
    print(f"{rate:.3f}", flush=True)
    return rate


def send(address: str, port: int, seconds: float) -> None:
    payload = b"\0" * CHUNK
    with socket.create_connection((address, port), timeout=10) as conn:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            conn.sendall(payload)


def _between(cluster: Cluster, source: int, target: int, serve: list[str], client: list[str],
             timeout_s: float) -> tuple[str, str]:
    """Run this module's `serve` command on host `target`, then its `client` command on host `source`;
    what each printed (the client's, then the server's)."""
    me = [sys.executable, "-m", "bench.infra.emulated.linkcheck"]
    server = subprocess.Popen(enter(cluster.hosts[target], [*me, *serve]), stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        server.stdout.readline()  # listening
        asked = subprocess.run(enter(cluster.hosts[source], [*me, *client]), check=True, timeout=timeout_s,
                               capture_output=True, text=True)
        served, _ = server.communicate(timeout=30)
        return asked.stdout, served
    finally:
        if server.poll() is None:
            server.kill()


def measure(cluster: Cluster, source: int, target: int, seconds: float = 2.0) -> float:
    """Mbit/s of one stream from host `source` to host `target` (the receiver's view)."""
    _, served = _between(cluster, source, target, ["receive", str(PORT)],
                         ["send", cluster.hosts[target].address, str(PORT), str(seconds)], seconds + 30)
    return float(served.strip().splitlines()[-1])


IDLE_S = 0.2  # between messages: the link's bucket refills, as between a step's exchanges


def answer(port: int) -> None:
    """Read each message (an 8-byte length, then its bytes) whole and answer it with one byte."""
    with socket.create_server(("0.0.0.0", port)) as server:
        print("listening", flush=True)
        conn, _ = server.accept()
        with conn:
            while header := conn.recv(8, socket.MSG_WAITALL):
                left = int.from_bytes(header, "big")
                while left:
                    left -= len(conn.recv(min(CHUNK, left)))
                conn.sendall(b"k")


def ask(address: str, port: int, nbytes: int, repeats: int) -> None:
    """Print the median seconds from sending one message of `nbytes` to its answer, after idle."""
    with socket.create_connection((address, port), timeout=10) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        message, times = nbytes.to_bytes(8, "big") + b"\0" * nbytes, []
        for _ in range(repeats):
            time.sleep(IDLE_S)
            start = time.perf_counter()
            conn.sendall(message)
            conn.recv(1)
            times.append(time.perf_counter() - start)
    print(f"{statistics.median(times):.6f}", flush=True)


def message_s(cluster: Cluster, source: int, target: int, nbytes: int, repeats: int = 5) -> float:
    """Median seconds one message of `nbytes` takes from host `source` to `target` and back (one byte)."""
    asked, _ = _between(cluster, source, target, ["answer", str(PORT)],
                        ["ask", cluster.hosts[target].address, str(PORT), str(nbytes), str(repeats)],
                        repeats * (IDLE_S + 10) + 30)
    return float(asked.strip().splitlines()[-1])


if __name__ == "__main__":
    if sys.argv[1] == "receive":
        receive(int(sys.argv[2]))
    elif sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif sys.argv[1] == "answer":
        answer(int(sys.argv[2]))
    else:
        ask(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
