"""How many cores a process may use under its cgroup's CPU quota: a container's CPU limit, a
scheduler's cgroup, an emulated host's budget (bench.infra.emulated.cpu_budget). Read from the
kernel, cgroup v1's `cpu` hierarchy or the v2 unified one; None where there is no quota."""

from __future__ import annotations

from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup")


def v1_cpu(root: Path = CGROUPS) -> Path:
    """Where cgroup v1 mounts its `cpu` hierarchy."""
    return root / "cpu"


def hierarchy(root: Path = CGROUPS) -> tuple[Path, int] | None:
    """(the hierarchy that has the cpu controller, its cgroup version), or None."""
    if (v1_cpu(root) / "cpu.cfs_quota_us").exists():
        return v1_cpu(root), 1
    controllers = root / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return root, 2
    return None


def of_group(folder: Path) -> float | None:
    """One group's quota in cores (quota over period), or None when it has none."""
    try:
        if (folder / "cpu.cfs_quota_us").exists():
            quota = int((folder / "cpu.cfs_quota_us").read_text())
            period = int((folder / "cpu.cfs_period_us").read_text())
        elif (folder / "cpu.max").exists():
            text, period_text = (folder / "cpu.max").read_text().split()
            quota, period = (-1 if text == "max" else int(text)), int(period_text)
        else:
            return None
    except (OSError, ValueError):
        return None
    return None if quota < 0 or period <= 0 else quota / period


def own_cores(membership: Path = Path("/proc/self/cgroup"), root: Path = CGROUPS) -> float | None:
    """This process's limit: the least quota of its cpu group and of every group above it."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    entries = [line.split(":", 2) for line in lines if line.count(":") >= 2]
    v1 = [(v1_cpu(root), path) for _, controllers, path in entries if "cpu" in controllers.split(",")]
    v2 = [(root, path) for hierarchy, controllers, path in entries if hierarchy == "0" and not controllers]
    if not (v1 or v2):
        return None
    base, path = (v1 or v2)[0]
    folder = base / path.lstrip("/")
    quotas = [of_group(group) for group in (folder, *folder.parents) if group.is_relative_to(base)]
    known = [q for q in quotas if q is not None]
    return min(known) if known else None
