"""An emulated cluster on one machine: H network namespaces ("hosts") joined by a
switch namespace, each link capped with tc tbf in both directions.

    {name}-sw      the switch: bridge br0 and one veth port h<k> per host
    {name}-h<k>    host k: eth0 (the other end of port h<k>) with one address

Nothing is added to the machine's own namespace but the login port Slurm needs
(slurm.py); hosts route only their subnet, so no traffic can leave them. Deleting
the namespaces deletes every link. The state is read back from the kernel each
time (no state file to go stale).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.errors import UsageError
from bench.infra.emulated import cpu_budget
from bench.infra.tools import find_tool

DEFAULT_NAME = "bench"
# Private /24s tried in order; the first that overlaps nothing on the machine is used.
CANDIDATE_NETS = [f"10.{a}.{b}.0/24" for a in (213, 214, 215) for b in range(0, 256, 17)]
PORT_PREFIX = "h"
SWITCH = "sw"
# tbf's bucket: 1 ms of traffic, so that a transfer ends at most 1 ms sooner than on a real link of
# that rate (a 4 ms bucket of at least 96 KB let 64 KB cross a "100 Mbit/s" link in 0.24 ms instead of
# 5.2: a step's small messages never met the cap). It must hold one packet as the stack hands it over:
# the links' GSO packets are made no larger than the bucket, which keeps 1000 Mbit/s at its rate (GSO
# off altogether, 1.5 KB packets, held this 2-core machine to 300-400 Mbit/s).
BURST_S = 0.001
MTU_BYTES = 1514
GSO_MAX_BYTES = 65536  # the kernel's own largest
QUEUE_LATENCY_MS = 50
ETC_NETNS = Path("/etc/netns")  # `ip netns exec NS` mounts /etc/netns/NS/* over /etc/*
RESIDENT_DAEMONS = ("slurmd",)  # a host's own daemons: not a run's processes, and not ended with one


@dataclass(frozen=True)
class Host:
    index: int
    namespace: str
    address: str


@dataclass(frozen=True)
class Cluster:
    name: str
    hosts: tuple[Host, ...]
    subnet: str
    link_mbit: float | None
    budget_cores: float | None = None  # each host's CPU budget (bench.infra.emulated.cpu_budget), where all have one
    cores_by_host: tuple[float | None, ...] = ()  # every host's budget, where they differ

    @property
    def budgets_differ(self) -> bool:
        return len(set(self.cores_by_host)) > 1

    def host_of(self, address: str) -> Host:
        return next(h for h in self.hosts if h.address == address)


# stands in for ssh: enters the namespace of a host (mpirun's rsh agent, horovodrun's ssh)
AGENT = Path(__file__).with_name("netns_ssh")


def enter(host: Host, argv: Sequence[str]) -> list[str]:
    """`argv` run on `host`: in its network namespace, in a UTS namespace of its own whose
    hostname is the host's name, so that MPI and the logs see distinct machines, and within the
    host's CPU budget when it has one."""
    return cpu_budget.joined(host.namespace, ["ip", "netns", "exec", host.namespace, "unshare", "--uts", "sh", "-c",
                                              'hostname "$0" && exec "$@"', host.namespace, *argv])


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _tc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["tc", *args], capture_output=True, text=True, check=True)


def require_tools() -> None:
    """Root, ip and tc, or one line saying which is missing."""
    if os.geteuid() != 0:
        raise UsageError("the emulated cluster needs root (network namespaces and tc): run as root")
    for tool in ("ip", "tc", "unshare"):
        if find_tool(tool) is None:
            raise UsageError(f"{tool} not found: install iproute2 / util-linux (./run_bench.sh setup does, as root)")


def namespaces() -> list[str]:
    out = _ip("-j", "netns", "list").stdout.strip()
    return [entry["name"] for entry in json.loads(out or "[]")]


def _host_names(name: str) -> list[str]:
    pattern = re.compile(rf"^{re.escape(name)}-{PORT_PREFIX}(\d+)$")
    found = [(int(m.group(1)), ns) for ns in namespaces() if (m := pattern.match(ns))]
    return [ns for _, ns in sorted(found)]


def find(name: str = DEFAULT_NAME) -> Cluster | None:
    """The cluster as the kernel has it now, or None when it is not up."""
    require_tools()
    names = _host_names(name)
    if not names or f"{name}-{SWITCH}" not in namespaces():
        return None
    hosts = []
    for k, ns in enumerate(names):
        addrs = json.loads(_ip("-n", ns, "-j", "-4", "addr", "show", "dev", "eth0").stdout or "[]")
        info = next((a for entry in addrs for a in entry.get("addr_info", [])), None)
        if info is None:
            return None
        hosts.append(Host(k, ns, info["local"]))
        subnet = str(ipaddress.ip_interface(f"{info['local']}/{info['prefixlen']}").network)
    return with_budgets(Cluster(name, tuple(hosts), subnet, link_rate_mbit(names[0])),
                        [cpu_budget.cores_of(ns) for ns in names])


def get(name: str = DEFAULT_NAME, min_hosts: int = 1) -> Cluster:
    cluster = find(name)
    if cluster is None:
        raise UsageError(f"emulated cluster {name!r} is not up: run ./run_bench.sh cluster up --hosts "
                         f"{max(min_hosts, 2)} --link-mbit 1000")
    if len(cluster.hosts) < min_hosts:
        raise UsageError(f"emulated cluster {name!r} has {len(cluster.hosts)} hosts, this run needs {min_hosts}: "
                         f"run ./run_bench.sh cluster up --hosts {min_hosts}")
    return cluster


def link_rate_mbit(namespace: str) -> float | None:
    qdiscs = json.loads(_tc("-n", namespace, "-j", "qdisc", "show", "dev", "eth0").stdout or "[]")
    for q in qdiscs:
        if q.get("kind") == "tbf":
            return q["options"]["rate"] * 8 / 1e6
    return None


def machine_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network the machine's own namespace has an address or a route in."""
    nets = []
    for entry in json.loads(_ip("-j", "-4", "addr").stdout or "[]"):
        for a in entry.get("addr_info", []):
            nets.append(ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network)
    for route in json.loads(_ip("-j", "-4", "route", "show", "table", "all").stdout or "[]"):
        dst = route.get("dst", "")
        if dst and dst != "default" and route.get("type", "unicast") in ("unicast", "local"):
            try:
                nets.append(ipaddress.ip_network(dst if "/" in dst else f"{dst}/32", strict=False))
            except ValueError:
                continue
    return nets


def choose_subnet(taken: list[ipaddress.IPv4Network]) -> ipaddress.IPv4Network:
    for text in CANDIDATE_NETS:
        net = ipaddress.ip_network(text)
        if not any(net.overlaps(t) for t in taken):
            return net
    raise UsageError("no free private /24 for the emulated cluster (every candidate overlaps a route)")


def _bucket_bytes(mbit: float) -> int:
    return int(mbit * 1e6 / 8 * BURST_S)


def gso_bytes(mbit: float) -> int:
    """The largest packet a link's device takes from the stack: 1 ms of its traffic, within the kernel's limits."""
    return max(MTU_BYTES, min(GSO_MAX_BYTES, _bucket_bytes(mbit)))


def tbf_args(mbit: float) -> list[str]:
    burst = max(_bucket_bytes(mbit), gso_bytes(mbit) + MTU_BYTES)
    return ["tbf", "rate", f"{mbit:g}mbit", "burst", str(burst), "latency", f"{QUEUE_LATENCY_MS}ms"]


def shape(cluster: Cluster, mbit: float) -> Cluster:
    """Cap every link at `mbit` each way: host eth0 egress (upload), switch port egress (download)."""
    switch = f"{cluster.name}-{SWITCH}"
    for host in cluster.hosts:
        for namespace, device in ((host.namespace, "eth0"), (switch, f"{PORT_PREFIX}{host.index}")):
            _ip("-n", namespace, "link", "set", "dev", device, "gso_max_size", str(gso_bytes(mbit)))
            _tc("-n", namespace, "qdisc", "replace", "dev", device, "root", *tbf_args(mbit))
    return replace(cluster, link_mbit=mbit)


def up(hosts: int, link_mbit: float, name: str = DEFAULT_NAME,
       budget_cores: float | Sequence[float] | None = None) -> Cluster:
    """Create (or reshape) the cluster, each host with `budget_cores` cores (one for all, or one per host;
    None: the machine's, shared); a half-made cluster is removed before the error is raised."""
    if hosts < 2 or hosts > 200:
        raise UsageError(f"--hosts: must be in [2, 200], got {hosts}")
    if not link_mbit > 0:
        raise UsageError(f"--link-mbit: must be > 0, got {link_mbit}")
    if budget_cores is not None:
        cpu_budget.check(hosts, budget_cores)
    require_tools()
    current = find(name)
    if current is not None and len(current.hosts) == hosts:
        write_hosts_files(list(current.hosts))
        return budget(shape(current, link_mbit), budget_cores)
    if current is not None or any(ns.startswith(f"{name}-") for ns in namespaces()):
        down(name)
    subnet = choose_subnet(machine_networks())
    switch = f"{name}-{SWITCH}"
    try:
        _ip("netns", "add", switch)
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        for dev in ("br0", "lo"):
            _ip("-n", switch, "link", "set", dev, "up")
        made = []
        for k, address in zip(range(hosts), subnet.hosts()):
            ns = f"{name}-{PORT_PREFIX}{k}"
            _ip("netns", "add", ns)
            _ip("link", "add", f"{PORT_PREFIX}{k}", "netns", switch, "type", "veth", "peer", "name", "eth0",
                "netns", ns)
            _ip("-n", switch, "link", "set", f"{PORT_PREFIX}{k}", "master", "br0")
            _ip("-n", switch, "link", "set", f"{PORT_PREFIX}{k}", "up")
            _ip("-n", ns, "addr", "add", f"{address}/{subnet.prefixlen}", "dev", "eth0")
            for dev in ("eth0", "lo"):
                _ip("-n", ns, "link", "set", dev, "up")
            made.append(Host(k, ns, str(address)))
        write_hosts_files(made)
    except (subprocess.CalledProcessError, OSError) as exc:
        down(name)
        where = f"{' '.join(exc.cmd)}: {(exc.stderr or '').strip()}" \
            if isinstance(exc, subprocess.CalledProcessError) else str(exc)
        raise UsageError(f"could not build the emulated cluster: {where}") from None
    return budget(shape(Cluster(name, tuple(made), str(subnet), None), link_mbit), budget_cores)


def budget(cluster: Cluster, budget_cores: float | Sequence[float] | None) -> Cluster:
    """Each host's CPU budget set (or lifted, when None); daemons and processes started on a host
    afterwards are held to it."""
    cpu_budget.apply([h.namespace for h in cluster.hosts], budget_cores)
    budgets = [None] * len(cluster.hosts) if budget_cores is None else cpu_budget.each(len(cluster.hosts), budget_cores)
    return with_budgets(cluster, budgets)


def with_budgets(cluster: Cluster, budgets: Sequence[float | None]) -> Cluster:
    """The cluster with its hosts' budgets: `budget_cores` where they are all alike, else `cores_by_host`."""
    alike = len(set(budgets)) <= 1
    return replace(cluster, budget_cores=budgets[0] if alike and budgets else None,
                   cores_by_host=() if alike else tuple(budgets))


def write_hosts_files(hosts: list[Host], extra: dict[str, str] | None = None) -> None:
    """Every host resolves every other host's name (its namespace name), as on a real cluster,
    and the `extra` {address: name} entries (Slurm's controller)."""
    names = {**{h.address: h.namespace for h in hosts}, **(extra or {})}
    table = "127.0.0.1 localhost\n::1 localhost\n" + "".join(f"{a} {n}\n" for a, n in names.items())
    for host in hosts:
        folder = ETC_NETNS / host.namespace
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts").write_text(table)


def processes_in(namespace: str, daemons: bool = False) -> list[int]:
    """The processes running on a host; its resident daemons (slurmd) only when `daemons`."""
    out = _ip("netns", "pids", namespace, check=False).stdout
    pids = [int(p) for p in out.split() if p.isdigit()]
    return pids if daemons else [p for p in pids if _command(p) not in RESIDENT_DAEMONS]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def login_address(cluster: Cluster) -> str:
    """The subnet's last address: the login port's, in the machine's own namespace."""
    return str(list(ipaddress.ip_network(cluster.subnet).hosts())[-1])


def login_device(name: str) -> str:
    return f"{name}-login"[:15]  # a Linux interface name holds 15 characters


def attach_login(cluster: Cluster) -> str:
    """A port of the switch in the machine's own namespace (the login node); its address."""
    address = login_address(cluster)
    device = login_device(cluster.name)
    if _ip("link", "show", device, check=False).returncode != 0:
        switch = f"{cluster.name}-{SWITCH}"
        _ip("link", "add", device, "type", "veth", "peer", "name", "login", "netns", switch)
        _ip("-n", switch, "link", "set", "login", "master", "br0")
        _ip("-n", switch, "link", "set", "login", "up")
        _ip("addr", "add", f"{address}/{ipaddress.ip_network(cluster.subnet).prefixlen}", "dev", device)
        _ip("link", "set", device, "up")
    return address


def end_processes(namespaces_: list[str], grace_s: float = 3.0, daemons: bool = False) -> None:
    """SIGTERM everything running in the namespaces (their daemons too when `daemons`), SIGKILL what is
    left after `grace_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [p for ns in namespaces_ for p in processes_in(ns, daemons)]
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 2.0)
        while pids and time.monotonic() < deadline:
            pids = [p for ns in namespaces_ for p in processes_in(ns, daemons)]
            time.sleep(0.1)
        if not pids:
            return


def down(name: str = DEFAULT_NAME) -> list[str]:
    """End the processes in the cluster's namespaces, then delete the namespaces (and with them every link)."""
    require_tools()
    ours = [ns for ns in namespaces() if ns == f"{name}-{SWITCH}" or ns in _host_names(name)]
    end_processes(ours, daemons=True)
    # the login port goes with the switch's namespace, but only once the kernel gets to it: delete it now
    _ip("link", "del", login_device(name), check=False)
    for ns in ours:
        _ip("netns", "del", ns, check=False)
        shutil.rmtree(ETC_NETNS / ns, ignore_errors=True)
    cpu_budget.remove(ours)
    return ours


def counters(cluster: Cluster) -> dict[int, tuple[int, int]]:
    """{host index: (bytes the host sent, bytes it received)}, read from the switch's ports."""
    links = json.loads(_ip("-n", f"{cluster.name}-{SWITCH}", "-s", "-j", "link", "show").stdout or "[]")
    out = {}
    for link in links:
        name = link.get("ifname", "")
        if name.startswith(PORT_PREFIX) and name[len(PORT_PREFIX):].isdigit():
            stats = link.get("stats64", {})
            # the switch port receives what the host sends, and sends what the host receives
            out[int(name[len(PORT_PREFIX):])] = (stats["rx"]["bytes"], stats["tx"]["bytes"])
    return out
