"""A process's CPU quota, read from cgroup trees laid out as the kernel's v1 and v2 ones."""

from pathlib import Path

from bench.infra.cpu_quota import hierarchy, own_cores


def group(root: Path, path: str, **files: str) -> Path:
    folder = root / path
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text + "\n")
    return folder


def test_v1_the_least_quota_of_the_group_and_those_above_it(tmp_path):
    root = tmp_path / "cgroup"
    group(root, "cpu", cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    group(root, "cpu/slurm", cpu_cfs_quota_us="150000", cpu_cfs_period_us="100000")
    group(root, "cpu/slurm/job_7", cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    membership = tmp_path / "cgroup.procs"
    membership.write_text("9:name=systemd:/\n3:cpu,cpuacct:/slurm/job_7\n1:pids:/\n")
    assert own_cores(membership, root) == 1.5
    group(root, "cpu/slurm/job_7", cpu_cfs_quota_us="5000", cpu_cfs_period_us="10000")
    assert own_cores(membership, root) == 0.5


def test_v2_reads_cpu_max_and_no_quota_is_none(tmp_path):
    root = tmp_path / "cgroup"
    group(root, "kubepods/pod1", cpu_max="max 100000")
    membership = tmp_path / "cgroup.procs"
    membership.write_text("0::/kubepods/pod1\n")
    assert own_cores(membership, root) is None
    group(root, "kubepods", cpu_max="250000 100000")
    assert own_cores(membership, root) == 2.5
    assert own_cores(tmp_path / "missing", root) is None


def test_the_hierarchy_with_the_cpu_controller_is_v1_s_cpu_or_v2_s_root_where_it_is_enabled(tmp_path):
    v1, v2, none = tmp_path / "v1", tmp_path / "v2", tmp_path / "none"
    group(v1, "cpu", cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    group(v2, "", cgroup_controllers="cpuset cpu io memory pids")
    group(none, "", cgroup_controllers="io memory pids")
    assert hierarchy(v1) == (v1 / "cpu", 1)
    assert hierarchy(v2) == (v2, 2)
    assert hierarchy(none) is None and hierarchy(tmp_path / "missing") is None
