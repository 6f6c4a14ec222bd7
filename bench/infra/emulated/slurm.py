"""Real Slurm on the emulated cluster: one munged and one slurmctld on a login port of
the switch, one slurmd per host namespace, each host with its own hostname, /tmp and
/dev/shm. After `cluster up`, `eval "$(./run_bench.sh cluster env)"` points the user's
salloc, sbatch and srun at it; `cluster down` stops every daemon.

The login address (the subnet's last address) is the one thing the cluster adds to the
machine's own namespace: the user's shell is the cluster's login node, and srun there
must reach the slurmds and be reached by them. Its link is not capped.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench import CHECKOUT
from bench.errors import UsageError
from bench.infra.emulated import cpu_budget, gpus, network
from bench.infra.tools import find_tool, free_ports

STATE_ROOT = Path("/run/distbench")
CONTROLLER = "ctl"  # slurmctld's hostname, resolvable on every host
DAEMONS = ("munged", "slurmctld", "slurmd")
PARTITION = "emulated"
CPUS_PER_NODE = 8  # more than the machine has: a 2-core machine still hosts a ps and a worker per node
READY_TIMEOUT_S = 30.0


def state_dir(name: str) -> Path:
    return STATE_ROOT / f"{name}-slurm"


def conf_path(name: str) -> Path:
    return state_dir(name) / "slurm.conf"


def require_slurm() -> None:
    for tool in ("slurmctld", "slurmd", "munged", "srun"):
        if find_tool(tool) is None:
            raise UsageError(f"{tool} not found: ./run_bench.sh setup installs slurm-wlm and munge (as root)")


def slurm_conf(cluster: network.Cluster, login: str, port: int, state: Path, gres: str = "") -> str:
    """slurm.conf of the cluster; `gres`: what each node line declares (" Gres=gpu:4"), empty for none."""
    nodes = "\n".join(f"NodeName={h.namespace} NodeAddr={h.address} CPUs={CPUS_PER_NODE}{gres} State=UNKNOWN"
                       for h in cluster.hosts)
    return f"""ClusterName={cluster.name}
{"GresTypes=gpu" if gres else ""}
SlurmctldHost={CONTROLLER}({login})
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={state}/run/munge.sock
StateSaveLocation={state}/spool/ctld
SlurmdSpoolDir={state}/spool/%n
SlurmctldPidFile={state}/run/slurmctld.pid
SlurmdPidFile={state}/run/slurmd-%n.pid
SlurmctldLogFile={state}/log/slurmctld.log
SlurmdLogFile={state}/log/slurmd-%n.log
SlurmctldPort={port}
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdTimeout=6
# a node whose slurmd died is declared down 18 s later at 5 (28 s at the default, 10)
MessageTimeout=5
KillWait=3
InactiveLimit=0
MinJobAge=30
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
{nodes}
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def start_detached(argv: list[str], log: Path) -> None:
    with open(log, "ab") as out:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                         start_new_session=True)


def up(cluster: network.Cluster, gpus_per_host: int = 0) -> None:
    """Start munged, slurmctld and one slurmd per host, each with `gpus_per_host` GPUs declared to Slurm
    (bench.infra.emulated.gpus); return once every node is idle."""
    require_slurm()
    down(cluster.name)
    state = state_dir(cluster.name)
    for sub in ("run", "log", "spool/ctld", *(f"spool/{h.namespace}" for h in cluster.hosts)):
        (state / sub).mkdir(parents=True, exist_ok=True)
    (state / "run").chmod(0o755)  # munge refuses a socket folder others cannot reach
    login = network.attach_login(cluster)
    network.write_hosts_files(list(cluster.hosts), extra={login: CONTROLLER})
    key = state / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    port = free_ports(1, login)[0]  # not 6817: another Slurm on this machine may hold it
    gres = gpus.declare(state, cluster.name, [h.namespace for h in cluster.hosts], gpus_per_host)
    (state / "slurm.conf").write_text(slurm_conf(cluster, login, port, state, gres))
    (state / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")  # none is used; slurmd reads it anyway
    start_detached(["munged", "-F", "-f", f"--socket={state}/run/munge.sock", f"--key-file={key}",
                    f"--pid-file={state}/run/munged.pid", f"--seed-file={state}/run/munged.seed",
                    f"--log-file={state}/log/munged.log"], state / "log" / "munged.out")
    wait_for(lambda: (state / "run" / "munge.sock").exists(), "munged", state / "log" / "munged.log")
    conf = str(state / "slurm.conf")
    start_detached(["unshare", "--uts", "sh", "-c", f'hostname {CONTROLLER} && exec slurmctld -D -f "$0"', conf],
                   state / "log" / "slurmctld.out")
    for host in cluster.hosts:
        start_node(cluster.name, host)
    wait_for(lambda: idle_nodes(cluster.name) >= len(cluster.hosts), "the slurmd nodes",
             state / "log" / "slurmctld.log")


def shared_in_tmp() -> list[Path]:
    """What every node must see but lies in /tmp, which each node has its own of: the checkout
    its tasks run from and the Python they run (a real cluster's shared file system holds both)."""
    checkout, python = CHECKOUT, Path(sys.prefix).resolve()
    found = [p for p in (checkout, python) if p.is_relative_to("/tmp")]
    return [p for p in found if not any(p != q and p.is_relative_to(q) for q in found)]


def start_node(name: str, host: network.Host) -> None:
    """The host's slurmd, in its namespace, with its own hostname, /tmp and /dev/shm, and within the
    host's CPU budget when it has one (the job steps it starts stay in it, and can read it)."""
    state = state_dir(name)
    tmp = state / "nodes" / host.namespace / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    tmp.chmod(0o1777)
    shared = ""
    for path in shared_in_tmp():  # seen at the same place in the node's own /tmp
        inside = tmp / path.relative_to("/tmp")
        inside.mkdir(parents=True, exist_ok=True)
        shared += f'mount --bind "{path}" "{inside}" && '
    # --rbind: the node's /tmp carries the shared folders mounted inside it
    node_setup = (f'{shared}{cpu_budget.mount_inside(host.namespace)}mount --rbind "{tmp}" /tmp '
                  f'&& mount -t tmpfs none /dev/shm && hostname {host.namespace} '
                  f'&& exec slurmd -D -N {host.namespace} -f "$0"')
    start_detached(cpu_budget.joined(host.namespace, ["ip", "netns", "exec", host.namespace, "unshare", "--uts",
                                                      "sh", "-c", node_setup, str(conf_path(name))]),
                   state / "log" / f"slurmd-{host.namespace}.out")


def slurm_env(name: str) -> dict[str, str]:
    return {"SLURM_CONF": str(conf_path(name))}


def env_lines(name: str) -> list[str]:
    """The user's shell's exports: Slurm's configuration, and where the hosts declare GPUs, the stand-in nvidia-smi
    first on PATH (job steps inherit it; on the login node it finds no GPU, as there is none)."""
    if not conf_path(name).exists():
        raise UsageError(f"emulated cluster {name!r} has no Slurm: run ./run_bench.sh cluster up --hosts 3 "
                         "--link-mbit 1000")
    stand_in = gpus.bin_dir(state_dir(name))
    path = [f'export PATH={stand_in}:"$PATH"'] if stand_in else []
    return [f"export {k}={v}" for k, v in slurm_env(name).items()] + path


def idle_nodes(name: str) -> int:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True,
                         env={**os.environ, **slurm_env(name)}, timeout=10)
    return sum(1 for line in out.stdout.split() if line.strip() == "idle")


def wait_for(ready, what: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except (OSError, subprocess.SubprocessError):
            pass
        time.sleep(0.2)
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
    raise UsageError(f"{what} did not come up within {READY_TIMEOUT_S:g} s" + (f": {tail[0]}" if tail else ""))


def daemon_pids(name: str) -> list[int]:
    """Every munged, slurmctld and slurmd started with this cluster's files (job steps end with their slurmd)."""
    marker = str(state_dir(name))
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            comm = (proc / "comm").read_text().strip()
        except OSError:
            continue
        if comm in DAEMONS and marker in cmdline:
            pids.append(int(proc.name))
    return pids


def down(name: str) -> None:
    """Stop every daemon of the cluster's Slurm and remove its state (its jobs end with it)."""
    state = state_dir(name)
    if state.exists() and daemon_pids(name):
        try:
            subprocess.run(["scancel", "--quiet", f"--partition={PARTITION}"], capture_output=True,
                           env={**os.environ, **slurm_env(name)}, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            pass  # a controller that does not answer is stopped below all the same
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = daemon_pids(name)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3.0
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = [p for p in pids if Path(f"/proc/{p}").exists()]
        if not pids:
            break
    shutil.rmtree(state, ignore_errors=True)
