"""The comparison's last step before its report: its own runs projected (`python -m bench project --from` on
its folder) to a cluster of hosts like this machine, so that its answer says which family is ahead there too
(bench.analysis.report.families). It takes a few seconds; a failure only leaves the projected answer out."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.analysis.projection.profile import PROFILE_FILE
from bench.drivers.presets.runner import BENCH

CLUSTER_WORKERS = (16, 128)
CLUSTER_LINKS_GBIT = (10, 100)
# `project --from` a default comparison's folder took 2.7 s on a 2-core AVX2 machine with a test session beside it
PROJECT_LIMIT_S = 120.0


def profile_argv(given: str | None, output: Path) -> list[str]:
    """--profile: the one given; else the profile ./run_bench.sh profile measured into the comparison's output; else
    none (project's default, which it names)."""
    if given:
        return ["--profile", given]
    measured = output / PROFILE_FILE
    return ["--profile", str(measured)] if measured.is_file() else []


def project_argv(folder: Path, output: Path, profile: str | None) -> list[str]:
    return ["project", "--from", str(folder), "--workers", ",".join(map(str, CLUSTER_WORKERS)),
            "--link-gbit", ",".join(f"{g:g}" for g in CLUSTER_LINKS_GBIT), "--json", *profile_argv(profile, output)]


def project(folder: Path, output: Path, profile: str | None, command: Sequence[str] = BENCH) -> bool:
    """Project the runs in `folder` (projection.json written there); False, with one line why, where it failed."""
    try:
        done = subprocess.run([*command, *project_argv(folder, output, profile)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=PROJECT_LIMIT_S, check=False)
    except subprocess.TimeoutExpired:
        print(f"compare: no projection: python -m bench project took over {PROJECT_LIMIT_S:.0f} s", file=sys.stderr)
        return False
    if done.returncode != 0:
        why = (done.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        print(f"compare: no projection: {why}", file=sys.stderr)
        return False
    return True
