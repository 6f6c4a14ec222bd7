"""Measures a link of the emulated cluster: one TCP stream from one host to another.

    python -m bench.infra.emulated.linkcheck receive PORT        (on the receiving host)
    python -m bench.infra.emulated.linkcheck send ADDRESS PORT SECONDS
"""

from __future__ import annotations

import socket
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


if __name__ == "__main__":
    if sys.argv[1] == "receive":
        receive(int(sys.argv[2]))
    else:
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
