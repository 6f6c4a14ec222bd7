"""Servers' ports are drawn below the kernel's ephemeral range, where no outgoing connection takes one."""

import socket
from pathlib import Path

from bench.infra.tools import SERVER_PORTS, free_ports


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    low, _ = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert SERVER_PORTS[1] <= low  # an outgoing connection never takes a server's port
    ports = free_ports(8)
    assert len(set(ports)) == 8 and all(SERVER_PORTS[0] <= p < SERVER_PORTS[1] for p in ports)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))

