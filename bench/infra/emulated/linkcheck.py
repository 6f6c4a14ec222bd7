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


def measure(cluster: Cluster, source: int, target: int, seconds: float = 2.0) -> float:
    """Mbit/s of one stream from host `source` to host `target` (the receiver's view)."""
    me = [sys.executable, "-m", "bench.infra.emulated.linkcheck"]
    receiver = subprocess.Popen(enter(cluster.hosts[target], [*me, "receive", str(PORT)]),
                                stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        receiver.stdout.readline()  # listening
        subprocess.run(enter(cluster.hosts[source], [*me, "send", cluster.hosts[target].address, str(PORT),
                                                     str(seconds)]), check=True, timeout=seconds + 30)
        out, _ = receiver.communicate(timeout=30)
        return float(out.strip().splitlines()[-1])
    finally:
        if receiver.poll() is None:
            receiver.kill()


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
    me = [sys.executable, "-m", "bench.infra.emulated.linkcheck"]
    receiver = subprocess.Popen(enter(cluster.hosts[target], [*me, "answer", str(PORT)]),
                                stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        receiver.stdout.readline()  # listening
        out = subprocess.run(enter(cluster.hosts[source], [*me, "ask", cluster.hosts[target].address, str(PORT),
                                                           str(nbytes), str(repeats)]),
                             check=True, timeout=repeats * (IDLE_S + 10) + 30, capture_output=True, text=True)
        return float(out.stdout.strip().splitlines()[-1])
    finally:
        receiver.wait(timeout=30)


if __name__ == "__main__":
    if sys.argv[1] == "receive":
        receive(int(sys.argv[2]))
    elif sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif sys.argv[1] == "answer":
        answer(int(sys.argv[2]))
    else:
        ask(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
