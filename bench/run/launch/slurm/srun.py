"""Inside a Slurm allocation (salloc, sbatch): every process of a run is an `srun` job
step on the allocated nodes, watched by the launcher like a local child.

Workers take the nodes in order (worker i on node i mod nodes); ps tasks take nodes of
their own after them when the allocation has enough, otherwise they share the workers'
nodes, and run.json's `placement` says which. MPI ranks are one step, started by
`srun --mpi=pmix`; TensorFlow's cluster is the nodes' addresses with a port per task.
A process that is itself a job step (SLURM_STEP_ID set) is not "in an allocation": it
runs where it is.
"""

from __future__ import annotations

import os
import random
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import UsageError
from bench.infra.tools import SERVER_PORTS
from bench.run.launch.host_kind import HostKind
from bench.run.launch.slurm.gloo import rendezvous as gloo_rendezvous
from bench.run.placement.gpus import workers_a_host_holds

# TF servers on shared nodes: one port per task from a random base of the servers' ports (tools.SERVER_PORTS)
PORT_RANGE = SERVER_PORTS
STEP_LOOKUP_S = 10.0
# job states in which Slurm, not the run, ended the steps
LOST_JOB_STATES = {"CANCELLED": "was cancelled (scancel)", "TIMEOUT": "reached its time limit",
                   "PREEMPTED": "was preempted", "DEADLINE": "reached its deadline"}


# srun reads these from its environment as if they were its flags (srun(1), INPUT ENVIRONMENT VARIABLES), and salloc
# and sbatch set them from the job's own request (salloc --gpus-per-node=4: SLURM_GPUS_PER_NODE=4), so every step
# would ask for the job's GPUs besides what it asks itself: Slurm 22.05 refused `--gres=none` beside an inherited
# SLURM_GPUS_PER_NODE ("Invalid Trackable RESource (TRES) specification"). A run's steps ask with flags alone.
JOB_GPU_REQUEST = ("SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK", "SLURM_GPUS_PER_SOCKET",
                   "SLURM_CPUS_PER_GPU", "SLURM_MEM_PER_GPU", "SLURM_GPU_BIND", "SLURM_TRES_PER_TASK")


def srun_alone(*flags: str) -> list[str]:
    """srun with `flags`, not with the job's GPU request that its environment carries (JOB_GPU_REQUEST)."""
    return ["env", *(f"--unset={name}" for name in JOB_GPU_REQUEST), "srun", *flags]


def in_allocation() -> bool:
    return "SLURM_JOB_ID" in os.environ and "SLURM_STEP_ID" not in os.environ


def _slurm(*argv: str, timeout: float = 20.0) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"{argv[0]} failed inside Slurm job {os.environ.get('SLURM_JOB_ID')}: {exc}") from None
    if done.returncode != 0:
        raise UsageError(f"{' '.join(argv[:3])} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


@dataclass(frozen=True)
class Allocation:
    job_id: str
    nodes: tuple[str, ...]
    addresses: dict[str, str]
    tasks: int  # processes the allocation holds: its task count, or one per node
    # the job's GPUs on each node, by their index on the node (scontrol show job -d: GRES=gpu:4(IDX:0-3)); a node
    # the job holds no GPU on is absent
    gpus_by_node: dict[str, tuple[str, ...]] = field(default_factory=dict)
    cpus_by_node: dict[str, int] = field(default_factory=dict)  # the job's CPUs on each node (its CPU_IDs)

    def gpus_on(self, node: str) -> list[str]:
        return list(self.gpus_by_node.get(node, ()))

    @property
    def has_gpus(self) -> bool:
        return any(self.gpus_by_node.values())

    def node_capacity(self, node: str, declared: int | None, worker_gpus: int) -> int:
        """Workers `node` takes: its GPUs (declared with --gpus-per-host, or the job's there) over a worker's;
        one where workers take no GPU or the node has none."""
        return workers_a_host_holds(declared if declared is not None else len(self.gpus_on(node)), worker_gpus)

    def holds(self, declared: int | None = None, worker_gpus: int = 1) -> int:
        """Worker processes the allocation holds: its tasks, or its nodes' GPUs over a worker's where more."""
        return max(self.tasks, sum(self.node_capacity(n, declared, worker_gpus) for n in self.nodes))

    @classmethod
    def current(cls) -> Allocation:
        job = os.environ["SLURM_JOB_ID"]
        nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST", "")
        nodes = tuple(hostnames(nodelist))
        if not nodes:
            raise UsageError(f"Slurm job {job} lists no nodes (SLURM_JOB_NODELIST={nodelist!r})")
        addresses = {}
        for line in _slurm("scontrol", "-o", "show", "node", ",".join(nodes)).splitlines():
            name = re.search(r"NodeName=(\S+)", line)
            addr = re.search(r"NodeAddr=(\S+)", line)
            if name and addr:
                addresses[name.group(1)] = addr.group(1)
        tasks = int(os.environ.get("SLURM_NTASKS", "0") or 0)
        gpus, cpus = node_resources(_slurm("scontrol", "show", "job", "-d", job), hostnames)
        return cls(job, nodes, {n: addresses.get(n, n) for n in nodes}, max(tasks, len(nodes)), gpus, cpus)


def hostnames(nodelist: str) -> list[str]:
    """Slurm's nodelist (h[0-1],x) as names."""
    return _slurm("scontrol", "show", "hostnames", nodelist).split()


def expand_ids(text: str) -> list[str]:
    """Slurm's id list (0-3,6) as ids."""
    out = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        out.extend(str(i) for i in range(int(low), int(high or low) + 1))
    return out


def node_resources(detail: str, names: Callable[[str], list[str]]) -> tuple[dict[str, tuple[str, ...]],
                                                                           dict[str, int]]:
    """({node: the job's GPU indices there}, {node: its CPUs there}) from `scontrol show job -d`'s per-node lines
    (`Nodes=h[0-1] CPU_IDs=0-3 Mem=0 GRES=gpu:a100:4(IDX:0-3)`), `names` expanding a nodelist: read per node, as a
    job of uneven --gpus or nodes of different GPU counts has them, and where accounting tracks no gres/gpu."""
    gpus: dict[str, tuple[str, ...]] = {}
    cpus: dict[str, int] = {}
    for line in detail.splitlines():
        where = re.search(r"\bNodes=(\S+)\s+CPU_IDs=(\S+)", line)
        if not where:
            continue
        held = re.search(r"GRES=\S*?\bgpu(?::[^:(,\s]+)?:\d+\(IDX:([0-9,-]+)\)", line)
        for node in names(where.group(1)):
            cpus[node] = len(expand_ids(where.group(2)))
            if held:
                gpus[node] = tuple(expand_ids(held.group(1)))
    return gpus, cpus


@dataclass
class SlurmPlacement(HostKind):
    allocation: Allocation
    roles: dict[str, list[str]]  # {"worker": [node, ...], "ps": [...]}
    ps_nodes: str  # "own" or "shared with workers"
    tag: str  # step names start with it, so that the run's steps can be found and ended
    port_base: int = field(default_factory=lambda: random.randrange(*PORT_RANGE))
    steps: dict[str, str] = field(default_factory=dict)  # {"worker 0": "12.3"}
    # GPUs each step's task asks for, by role, where the job holds GPUs (as sites expect a step to ask: a step that
    # asks for none gets none, `--gres=none`); empty: the job has no GPU GRES, and steps ask for nothing
    step_gpus: dict[str, int] = field(default_factory=dict)

    @classmethod
    def for_processes(cls, allocation: Allocation, processes: dict[str, int], tag: str, declared: int | None = None,
                      gpus: dict[str, int] | None = None) -> SlurmPlacement:
        """Workers on the least filled node with room (on nodes alike, worker i on node i mod N, as srun's cyclic
        distribution puts ranks), as many a node as its GPUs (declared with --gpus-per-host, or the job's there)
        give; the other roles after them. `gpus`: each role's GPUs a process, asked of Slurm where the job has
        GPUs."""
        nodes = allocation.nodes
        workers = processes.get("worker", 0)
        worker_gpus = (gpus or {}).get("worker", 0)
        holds = allocation.holds(declared, worker_gpus)
        if workers > holds:
            most = max(allocation.node_capacity(n, declared, worker_gpus) for n in nodes)
            each = f"nodes, up to {most} workers a node by its GPUs" if most > 1 else "nodes"
            more = max(-(-workers // most), len(nodes) + 1)
            raise UsageError(f"--workers {workers} is more than Slurm job {allocation.job_id} holds "
                             f"({holds}: {len(nodes)} {each}): ask for more (salloc -N {more}) or fewer workers")
        roles = {"worker": fill_nodes(allocation, workers, declared, worker_gpus)}
        free = list(nodes[workers:])
        ps_nodes = "own"
        for role in sorted(r for r in processes if r != "worker"):
            count = processes[role]
            if len(free) >= count:
                roles[role], free = free[:count], free[count:]
            else:
                ps_nodes = "shared with workers"
                roles[role] = [nodes[(workers + j) % len(nodes)] for j in range(count)]
        asked = {role: (gpus or {}).get(role, 0) for role in processes} if allocation.has_gpus else {}
        return cls(allocation, {r: hosts for r, hosts in roles.items() if hosts}, ps_nodes, tag, step_gpus=asked)

    def task_hosts(self) -> dict[str, list[str]]:
        return {role: list(nodes) for role, nodes in self.roles.items()}

    def labels(self) -> list[tuple[str, int, str]]:
        return [(role, i, node) for role, nodes in self.roles.items() for i, node in enumerate(nodes)]

    def tf_cluster(self) -> dict[str, list[str]]:
        port = iter(range(self.port_base, self.port_base + 1000))
        return {role: [f"{self.allocation.addresses[node]}:{next(port)}" for node in nodes]
                for role, nodes in self.roles.items()}

    def describe(self) -> dict:
        return {"scheduler": "slurm", "job_id": self.allocation.job_id, "ps_nodes": self.ps_nodes,
                "hosts": {f"{role} {i}": {"node": node, "address": self.allocation.addresses[node]}
                          for role, i, node in self.labels()},
                "steps": dict(self.steps)}

    def step_name(self, what: str) -> str:
        return f"{self.tag}:{what}"

    def on_node(self, node: str) -> int:
        """The run's processes on `node`."""
        return sum(placed.count(node) for placed in self.roles.values())

    def gpu_flags(self, role: str, node: str, alone: bool = False) -> list[str]:
        """srun's request of GPUs for a one-task step of `role` on `node`, where the job holds GPUs. Steps that
        overlap share GRES (three `--overlap --gpus-per-task=1` steps on a node all got GPU 0), so a step that takes
        GPUs asks for all the job's GPUs on its node, and its process takes those of its local rank among the
        node's GPU-taking processes (bench.run.placement); `alone`: the run's only step, which asks for its own.
        `--gpus=N` (and `--gres=none`) work in a job of --gres, --gpus-per-node, --gpus or --gpus-per-task alike, once
        the step no longer inherits the job's request (JOB_GPU_REQUEST)."""
        if not self.step_gpus:
            return []
        need = self.step_gpus.get(role, 0)
        if not need:
            return ["--gres=none"]
        return [f"--gpus={need if alone else max(need, len(self.allocation.gpus_on(node)))}"]

    def cpu_flags(self, node: str) -> list[str]:
        """Each one-task step's share of the job's CPUs on its node (a step asks for one otherwise, and where cores
        are pinned the node's processes would share it)."""
        cpus = self.allocation.cpus_by_node.get(node)
        return [f"--cpus-per-task={max(1, cpus // self.on_node(node))}"] if cpus else []

    def srun(self, role: str, index: int, argv: Sequence[str], alone: bool = False) -> list[str]:
        """`argv` as one job step on the node of `role` `index`."""
        node = self.roles[role][index]
        return srun_alone("--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}", *self.cpu_flags(node),
                          *self.gpu_flags(role, node, alone), f"--job-name={self.step_name(f'{role} {index}')}",
                          "--kill-on-bad-exit=1", "--quiet", *argv)

    def command(self, role: str, index: int, argv: list[str], env: dict[str, str]) -> list[str]:
        """A task's command as placed (the host kinds' one interface): a job step; srun passes `env` on."""
        del env
        return self.srun(role, index, argv)

    def ranks(self, argv: list[str], gloo: bool, env: dict[str, str],
              run_dir: Path) -> tuple[list[str], dict[str, str]]:
        """The ranks as one job step of the allocation (srun passes the environment along)."""
        del env
        if self.cyclic():
            return self.srun_ranks(argv, mpi=not gloo), {}
        hostfile = run_dir / "slurm-hostfile"  # rank i on worker i's node, where the nodes take unlike counts
        hostfile.write_text("".join(f"{node}\n" for node in self.roles["worker"]))
        return self.srun_ranks(argv, mpi=not gloo), {"SLURM_HOSTFILE": str(hostfile)}

    def cyclic(self) -> bool:
        """Whether worker i is on node i mod N of the workers' nodes (srun's cyclic distribution)."""
        workers = self.roles["worker"]
        nodes = list(dict.fromkeys(workers))
        return workers == [nodes[i % len(nodes)] for i in range(len(workers))]

    def srun_ranks(self, argv: Sequence[str], mpi: bool = True) -> list[str]:
        """`argv` as the ranks of one job step, rank i on worker i's node (srun's cyclic distribution, or the
        SLURM_HOSTFILE `ranks` writes); `mpi`: they meet through PMIx (MPI_Init), else through Horovod's rendezvous
        (Gloo). Each rank asks for its GPUs (`--gpus-per-task`: Slurm binds rank r of a node GPU r, in a job of
        --gres, --gpus-per-node or --gpus alike) and its share of the node's CPUs."""
        workers = self.roles["worker"]
        nodes = list(dict.fromkeys(workers))
        need = self.step_gpus.get("worker", 0)
        gpus = ([f"--gpus-per-task={need}"] if need else ["--gres=none"]) if self.step_gpus else []
        known = [self.allocation.cpus_by_node[n] for n in nodes if n in self.allocation.cpus_by_node]
        share = min(cpus // workers.count(n) for n, cpus in zip(nodes, known)) if len(known) == len(nodes) else 0
        # --overcommit where a node's ranks outnumber the CPUs the job holds there (salloc -N 2 on nodes of 4 GPUs
        # holds a CPU a node, and 4 ranks a node, one a GPU, are the run asked for): srun refuses such a step
        cpus = [f"--cpus-per-task={share}"] if share else ["--overcommit"]
        distribution = "cyclic" if self.cyclic() else "arbitrary"
        return srun_alone("--overlap", *cpus, f"--mpi={'pmix' if mpi else 'none'}", f"--nodes={len(nodes)}",
                          f"--ntasks={len(workers)}", f"--nodelist={','.join(nodes)}", f"--distribution={distribution}",
                          *gpus, f"--job-name={self.step_name('ranks')}", "--kill-on-bad-exit=1", "--quiet", *argv)

    def running_steps(self) -> dict[str, str]:
        """{step name without the tag: step id} of this run's steps that Slurm still lists."""
        try:
            out = _slurm("squeue", "-h", "-s", "-j", self.allocation.job_id, "-o", "%i %j", timeout=10)
        except UsageError:
            return {}
        prefix = f"{self.tag}:"
        found = {}
        for line in out.splitlines():
            step, _, name = line.strip().partition(" ")
            if name.startswith(prefix):
                found[name.removeprefix(prefix)] = step
        return found

    def note_steps(self, expected: int) -> dict[str, str]:
        """Wait (briefly) until Slurm lists the run's `expected` steps; remember their ids."""
        deadline = time.monotonic() + STEP_LOOKUP_S
        while True:
            self.steps.update(self.running_steps())
            if len(self.steps) >= expected or time.monotonic() > deadline:
                return self.steps
            time.sleep(0.2)

    def explain(self, status: str) -> str:
        """A failed run's status, told by what Slurm did to the job (cancelled, a node lost, out of time)."""
        if not status.startswith("failed"):
            return status
        job = self.allocation.job_id
        try:
            state = re.search(r"JobState=(\S+)", _slurm("scontrol", "-o", "show", "job", job, timeout=10))
        except UsageError:
            state = None
        state = state.group(1) if state else ""
        lost = self.lost_nodes()
        if lost:
            return (f"failed: node {', '.join(lost)} of Slurm job {job} was lost (not responding); "
                    f"{status.removeprefix('failed: ')}")
        if state in LOST_JOB_STATES:
            return f"interrupted: Slurm job {job} {LOST_JOB_STATES[state]}"
        return status

    def lost_nodes(self) -> list[str]:
        nodes = ",".join(sorted({node for _, _, node in self.labels()}))
        try:
            out = _slurm("sinfo", "-h", "-N", "-n", nodes, "-o", "%N %T", timeout=10)
        except UsageError:
            return []
        return sorted({line.split()[0] for line in out.splitlines()
                       if len(line.split()) == 2 and line.split()[1].rstrip("*~#!%$@^-").lower()
                       in ("down", "fail", "failing", "unknown", "drained", "draining")})

    def held(self, run_dir: Path, run_start: float) -> AbstractContextManager[dict[str, str]]:
        del run_dir, run_start
        return steps_ended(self)

    def serving(self, gloo: bool) -> AbstractContextManager[dict[str, str]]:
        """Horovod's rendezvous for ranks over Gloo (srun's ranks meet MPI's through PMIx)."""
        return gloo_rendezvous(self.roles["worker"], self.allocation.addresses) if gloo else nullcontext({})

    def started(self, commands: int) -> None:
        self.steps.clear()  # a relaunch's steps replace the last ones
        self.note_steps(commands)

    def end_started(self) -> None:
        """scancel every step of the run that is still listed (its srun may have died first)."""
        left = self.running_steps()
        if left:
            subprocess.run(["scancel", "--quiet", *left.values()], capture_output=True, timeout=20, check=False)


def counts_that_fit(counts: Sequence[int], flag: str, declared: int | None = None) -> list[int]:
    """A preset's worker counts that the allocation holds (its tasks, or its nodes' GPUs a worker each); the
    others are left out, and said so."""
    job = Allocation.current()
    holds = job.holds(declared, 1)
    fit = [n for n in counts if n <= holds]
    if not fit:
        raise UsageError(f"{flag}: Slurm job {job.job_id} holds {holds} processes, fewer than "
                         f"{min(counts)}: ask for more nodes (salloc -N {min(counts)})")
    if len(fit) < len(counts):
        print(f"Slurm job {job.job_id} holds {holds} processes: {flag} "
              f"{','.join(str(n) for n in counts if n > holds)} left out", file=sys.stderr, flush=True)
    return fit


def run_tag() -> str:
    """A prefix for the step names of one run of this launcher (unique within the job)."""
    return f"distbench-{os.getpid()}-{time.time_ns() % 10**9}"


@contextmanager
def steps_ended(placement: SlurmPlacement) -> Iterator[dict[str, str]]:
    """While the run's steps start and train; whatever ends the run, end the steps."""
    try:
        yield {}
    finally:
        placement.end_started()


def fill_nodes(allocation: Allocation, workers: int, declared: int | None, worker_gpus: int) -> list[str]:
    """The node of each worker: the least filled of the nodes with room (every node where none has)."""
    nodes = allocation.nodes
    count = dict.fromkeys(nodes, 0)
    placed = []
    for _ in range(workers):
        room = [n for n in nodes if count[n] < allocation.node_capacity(n, declared, worker_gpus)] or list(nodes)
        node = min(room, key=lambda n: count[n])  # the first of the least filled: cyclic on nodes alike
        count[node] += 1
        placed.append(node)
    return placed


def place(processes: dict[str, int], tag: str, declared_gpus: int | None = None,
          gpus: dict[str, int] | None = None) -> SlurmPlacement:
    """The run's processes on the allocation's nodes; `gpus`: each role's GPUs a process, so that a node holds
    as many workers as its GPUs (declared with --gpus-per-host, or the job's) give."""
    return SlurmPlacement.for_processes(Allocation.current(), {r: n for r, n in processes.items() if n > 0}, tag,
                                        declared_gpus, gpus)


def run_as_step(config_json: str, output: Path, gpus: dict[str, int], declared: int | None) -> int:
    """A one-process run as one job step on the allocation's first node, asking for the GPUs its process takes
    (`gpus`: {"worker": n}; a towers run, its towers'); its exit status."""
    placement = place({"worker": 1}, run_tag(), declared, gpus)
    check_shared(placement, output)
    argv = placement.srun("worker", 0, [sys.executable, "-m", "bench", "--config-json", config_json], alone=True)
    with steps_ended(placement):
        return subprocess.run(argv, check=False).returncode


def step_record() -> dict | None:
    """run.json's `placement` for a process that is itself a job step (a one-process run)."""
    if "SLURM_STEP_ID" not in os.environ:
        return None
    node = os.environ.get("SLURMD_NODENAME", socket.gethostname())
    try:
        address = socket.gethostbyname(node)
    except OSError:
        address = node
    job = os.environ.get("SLURM_JOB_ID", "")
    return {"scheduler": "slurm", "job_id": job, "ps_nodes": "own",
            "hosts": {"worker 0": {"node": node, "address": address}},
            "steps": {"worker 0": f"{job}.{os.environ['SLURM_STEP_ID']}"}}


def check_shared(placement: SlurmPlacement, folder: Path) -> None:
    """Refuse, before any step starts, a run folder that some node of the run cannot see."""
    nodes = sorted({node for _, _, node in placement.labels()})
    unseen = nodes_not_seeing(folder, ["--overlap", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}",
                                       f"--nodelist={','.join(nodes)}"])
    if unseen:
        raise UsageError(f"--output {folder} is not visible on node(s) {', '.join(unseen)} of Slurm job "
                         f"{placement.allocation.job_id}: use a folder on the cluster's shared file system")


def nodes_not_seeing(folder: Path, where: Sequence[str]) -> list[str]:
    """The nodes (chosen by srun's flags `where`, one task each) on which `folder` is not there."""
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".slurm-probe-{os.environ.get('SLURM_JOB_ID', 'none')}-{os.getpid()}"
    probe.write_text("")
    try:
        out = _slurm("srun", *where, "--quiet", "sh", "-c",
                     'if test -e "$0"; then echo "$SLURMD_NODENAME seen"; else echo "$SLURMD_NODENAME unseen"; fi',
                     str(probe), timeout=60)
    finally:
        probe.unlink(missing_ok=True)
    return sorted(line.split()[0] for line in out.splitlines() if line.endswith(" unseen"))
