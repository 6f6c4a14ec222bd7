"""A CPU budget per emulated host: every process on host k (its slurmd and so the job steps
Slurm starts there, and what is started on it by hand or by mpirun's agent) runs in a cgroup
of its own whose CFS quota is C cores. Without one, 4 hosts on a 2-core machine share 2 cores
and a host's rates depend on how many hosts are busy: Horovod over MPI measured 97 MB/s on 2
hosts and 47 on 4 of one 1000 Mbit/s cluster; with half a core each, 43 and 52
(docs/projection-checks.md, "How `--from` is checked against the emulated cluster").

The groups are `<root>/distbench-hosts/<namespace>`, root being the cgroup v1 `cpu` hierarchy or
the v2 unified one. The budget is read back from the kernel, like the links' caps; `cluster down`
removes the groups once their processes have ended.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Sequence
from pathlib import Path

from bench.errors import UsageError
from bench.infra import cpu_quota

PARENT = "distbench-hosts"
# 10 ms, not the kernel's default 100 ms: over 100 ms periods the quota throttles a step of 50-90 ms in
# bursts (a single cnn run on half a core: step sd 23.6 ms of 88; 10.4 of 93 over 10 ms periods)
PERIOD_US = 10_000
MIN_CORES = 0.1  # the kernel takes no quota below 1 ms a period
NO_CONTROLLER = "--host-cores: this machine has no cgroup cpu controller (/sys/fs/cgroup)"
REMOVE_WAIT_S = 2.0  # a killed process leaves its group a moment after it is gone from the namespace


@functools.cache
def _root() -> tuple[Path, int] | None:
    return cpu_quota.hierarchy()


def group(namespace: str) -> Path | None:
    """The host's group, when the machine has a cpu controller (whether or not the group exists)."""
    found = _root()
    return found[0] / PARENT / namespace if found else None


def _existing(namespace: str) -> Path | None:
    """The host's group when it has one."""
    path = group(namespace)
    return path if path is not None and path.exists() else None


def machine_cores() -> int:
    return len(os.sched_getaffinity(0))


def each(hosts: int, cores: float | Sequence[float]) -> list[float]:
    """Every host's budget: one for all, or one per host."""
    return [float(cores)] * hosts if isinstance(cores, int | float) else [float(c) for c in cores]


def check(hosts: int, cores: float | Sequence[float]) -> None:
    """One line, before anything is made, when the budget cannot be given to every host at once: one
    budget for every host, or one per host."""
    budgets = each(hosts, cores)
    if len(budgets) != hosts:
        raise UsageError(f"--host-cores: one budget for every host, or one per host ({hosts}), got {len(budgets)}")
    if not min(budgets) >= MIN_CORES:
        raise UsageError(f"--host-cores: must be at least {MIN_CORES:g}, got {min(budgets):g}")
    have = machine_cores()
    if sum(budgets) > have + 1e-9:
        said = f"{hosts} hosts x {budgets[0]:g}" if len(set(budgets)) == 1 else " + ".join(f"{c:g}" for c in budgets)
        raise UsageError(f"--host-cores: {said} cores is more than this machine's {have}: "
                         "the hosts would share cores and none would have its budget")
    if _root() is None:
        raise UsageError(NO_CONTROLLER)


def apply(namespaces: list[str], cores: float | Sequence[float] | None) -> None:
    """Give each host `cores` (one for all, or one per host; None: no limit); processes that join the group
    later are held to it."""
    found = _root()
    if found is None:
        if cores is not None:
            raise UsageError(NO_CONTROLLER)
        return
    root, version = found
    parent = root / PARENT
    if cores is None and not parent.exists():
        return
    parent.mkdir(exist_ok=True)
    if version == 2:
        (root / "cgroup.subtree_control").write_text("+cpu")
        (parent / "cgroup.subtree_control").write_text("+cpu")
    budgets = [None] * len(namespaces) if cores is None else each(len(namespaces), cores)
    for namespace, budget in zip(namespaces, budgets, strict=True):
        quota = -1 if budget is None else round(budget * PERIOD_US)
        path = parent / namespace
        path.mkdir(exist_ok=True)
        if version == 1:
            (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (path / "cpu.max").write_text(f"{'max' if quota < 0 else quota} {PERIOD_US}")


def cores_of(namespace: str) -> float | None:
    """The host's budget in cores as the kernel has it, or None when it has none."""
    path = _existing(namespace)
    return cpu_quota.of_group(path) if path else None


def groups(namespaces: list[str]) -> dict[str, str]:
    """{namespace: its group's folder} for the hosts that have one (mpirun's agent joins them)."""
    found = {ns: _existing(ns) for ns in namespaces}
    return {ns: str(path) for ns, path in found.items() if path}


def joined(namespace: str, argv: list[str]) -> list[str]:
    """`argv` started in the host's group when it has one (what it starts stays there). Joined
    before `ip netns exec`, which mounts a sysfs of the namespace's own without /sys/fs/cgroup."""
    path = _existing(namespace)
    if path is None:
        return argv
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(path / "cgroup.procs"), *argv]


def _v1_mount(root: Path) -> tuple[Path, str] | None:
    """(mount point, options) of the machine's v1 hierarchy that has the cpu controller."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = line.partition(" - ")
        kind, _source, options = (tail.split() + ["", "", ""])[:3]
        point = Path(fields.split()[4])
        wanted = [o for o in options.split(",") if o != "rw" and o != "ro"]
        if kind == "cgroup" and "cpu" in wanted and point.parent == root.parent:
            return point, ",".join(wanted)
    return None


def mount_inside(namespace: str) -> str:
    """Shell text that mounts the machine's cpu controller in a budgeted host's own mount namespace,
    where `ip netns exec` has put a sysfs without /sys/fs/cgroup: the host's processes then read
    their budget where a machine's would (bench.infra.cpu_quota). Empty for a host without one."""
    if _existing(namespace) is None:
        return ""
    root, version = _root()
    if version == 2:
        return f'mount -t cgroup2 cgroup2 "{root}" && '
    mounted = _v1_mount(root)
    if mounted is None:
        return ""
    point, options = mounted
    link = f' && ln -s "{point.name}" "{root}"' if point != root else ""
    return (f'mount -t tmpfs cgroup "{root.parent}" && mkdir -p "{point}" && '
            f'mount -t cgroup -o {options} cgroup "{point}"{link} && ')


def remove(namespaces: list[str]) -> None:
    """The hosts' groups, once their processes have ended; the parent when it is left empty."""
    found = _root()
    if found is None:
        return
    parent = found[0] / PARENT
    for namespace in namespaces:
        deadline = time.monotonic() + REMOVE_WAIT_S
        while True:
            try:
                (parent / namespace).rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    try:
        parent.rmdir()
    except OSError:
        pass  # another cluster's hosts are still in it, or it never was
