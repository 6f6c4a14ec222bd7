"""`./run_bench.sh gpu-check`: the first hour on a GPU host. It checks that TensorFlow sees the host's GPUs (and
is the CUDA build), that Horovod was built with NCCL, and runs every strategy briefly on the GPUs, reading back
from each run.json that every process ran on GPUs of its own; then the report of those runs. Within
CHECK_BUDGET_S; on a host without a GPU it says so in one line and exits 0."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.infra.gpus import gpu_table, horovod_links_nccl
from bench.run.contract import default_workers
from bench.run.placement.gpus import environment_slots
from bench.usage import OneLineParser
from strategies import registry

CHECK_BUDGET_S = 600.0  # the whole check, its report included, ends within 10 minutes
RUN_LIMIT_S = 150.0  # one short run on GPUs: start-up (a few processes importing TensorFlow) and 60 steps
REPORT_LIMIT_S = 30.0  # the report of a dozen short runs
RUN_FLAGS = ("--model", "cnn", "--data", "synthetic", "--steps", "60", "--batch-size", "64")
# TensorFlow's own answer: whether it is a CUDA build (whatever its package is called), and the GPUs it sees
SEES = "import tensorflow as tf; print(int(tf.test.is_built_with_cuda()), len(tf.config.list_physical_devices('GPU')))"


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench gpu-check", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output", default="results", help="where the check's runs go (default: %(default)s)")
    return p


def say(line: str) -> None:
    print(f"gpu-check: {line}", flush=True)


def placement_problems(record: dict[str, Any]) -> list[str]:
    """What is wrong with where a run's processes ran: a process of the plan with GPUs that recorded none or
    other ones (by index, unless Slurm bound its step's: a confined step numbers its GPUs from 0), two processes on
    one GPU (by UUID, else by host and index; unless the run shared them)."""
    problems, taken = [], {}
    devices = record.get("devices") or {}
    for planned in record.get("plan") or []:
        if not planned["gpus"]:
            continue
        label = f"{planned['role']} {planned['index']}"
        used = devices.get(label)
        if used is None:
            problems.append(f"{label} recorded no devices")
            continue
        if len(used.get("gpus") or []) != len(planned["gpus"]) or (
                used.get("gpus") != planned["gpus"] and not used.get("bound_by_slurm")):
            problems.append(f"{label} saw GPUs {used.get('gpus')}, planned {planned['gpus']}")
        for gpu in used.get("gpu_uuids") or [(used.get("host"), g) for g in used.get("gpus") or []]:
            other = taken.setdefault(gpu, label)
            if other != label and not (record.get("config") or {}).get("share_gpus"):
                name = gpu if isinstance(gpu, str) else f"{gpu[1]} of {gpu[0]}"
                problems.append(f"{label} and {other} both on GPU {name}")
    return problems


def tensorflow_problems(record: dict[str, Any]) -> list[str]:
    """Processes given GPUs on which TensorFlow did not see as many (it computed on the CPU)."""
    return [f"{label}: TensorFlow saw {len(d.get('tensorflow_gpus') or [])} of its {len(d['gpus'])} GPU(s)"
            for label, d in (record.get("devices") or {}).items()
            if d.get("gpus") and len(d.get("tensorflow_gpus") or []) != len(d["gpus"])]


def tensorflow_sees() -> tuple[bool, int] | None:
    """(TensorFlow is a CUDA build, the GPUs it sees), asked of TensorFlow in a child; None where that failed."""
    done = subprocess.run([sys.executable, "-c", SEES], capture_output=True, text=True, timeout=120, check=False,
                          env={"TF_CPP_MIN_LOG_LEVEL": "3", **os.environ})
    if done.returncode != 0 or not done.stdout.strip():
        return None
    cuda, seen = done.stdout.strip().splitlines()[-1].split()
    return cuda == "1", int(seen)


def checked_order(names: Sequence[str]) -> list[str]:
    """The strategies in the order the check runs them: the baseline first (every other figure is read against
    it, so the budget must not cut it), then by name."""
    return sorted(names, key=lambda n: (not registry.get(n).baseline, n))


def may_start(elapsed_s: float) -> bool:
    """Whether a run may start `elapsed_s` into the check: it and the report still end within CHECK_BUDGET_S."""
    return elapsed_s + RUN_LIMIT_S + REPORT_LIMIT_S <= CHECK_BUDGET_S


def workers_for(name: str, gpus: int) -> int:
    low, high = registry.get(name).worker_range
    if high is not None and high < 2:
        return low
    return max(low, min(gpus, high or gpus)) if gpus > 1 else default_workers(registry.get(name))


def check_strategy(name: str, gpus: int, output: Path) -> tuple[bool, str]:
    workers = workers_for(name, gpus)
    argv = [sys.executable, "-m", "bench", "--strategy", name, "--workers", str(workers), *RUN_FLAGS,
            "--output", str(output), "--run-name", f"{name}-w{workers}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_LIMIT_S, check=False)
    except subprocess.TimeoutExpired:
        return False, f"{name} --workers {workers}: no end within {RUN_LIMIT_S:.0f} s"
    run = output / f"{name}-w{workers}" / "run.json"
    if not run.exists():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return False, f"{name} --workers {workers}: did not start ({last})"
    record = json.loads(run.read_text())
    problems = placement_problems(record) + tensorflow_problems(record)
    if record.get("status") != "ok" or problems:
        return False, f"{name} --workers {workers}: {record.get('status')}; {'; '.join(problems) or 'placed right'}"
    on = sorted({g for d in (record.get('devices') or {}).values() for g in d.get("gpus") or []})
    rate = (record.get("summary") or {}).get("throughput_examples_per_s")
    return True, (f"{name} --workers {workers}: ok, processes on GPUs {','.join(map(str, on))}, each its own, "
                  f"{rate:,.0f} examples/s" if rate else f"{name} --workers {workers}: ok, on GPUs {on}")


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    table = gpu_table()
    slots, _ = environment_slots(None)  # the GPUs this process may use: CUDA_VISIBLE_DEVICES' where it is set
    if not table or not slots:
        say("no GPU on this host (nvidia-smi lists none)" if not table else
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')} hides every GPU of this host")
        return 0
    began = time.monotonic()
    names = ", ".join(sorted({row["name"] for row in table}))
    given = "" if len(slots) == len(table) else f", {len(slots)} of them given (CUDA_VISIBLE_DEVICES)"
    say(f"{len(table)} GPU(s) on this host: {names}{given}")
    answer = tensorflow_sees()
    if answer is not None and not answer[0]:
        say("TensorFlow here is a CPU build (tf.test.is_built_with_cuda() is False): it computes on the CPU and "
            "cannot use these GPUs; ./run_bench.sh setup --gpu installs the CUDA build")
        return 1
    seen = answer[1] if answer else None
    say(f"TensorFlow sees {seen} GPU(s)" + ("" if seen == len(slots) else f", not {len(slots)}: check the driver "
                                            "and CUDA libraries (docs/gpus.md)"))
    nccl = horovod_links_nccl()
    say("Horovod: built with NCCL" if nccl else "Horovod: built without NCCL: allreduce copies GPU tensors through "
        "host memory (./run_bench.sh setup --gpu with a CUDA compiler; docs/gpus.md)")
    output = Path(args.output) / time.strftime("gpu-check-%Y%m%d-%H%M%S")
    every = checked_order(list(registry.all_strategies()))
    passed, tried = 0, 0
    for name in every:
        if not may_start(time.monotonic() - began):
            say(f"{', '.join(every[tried:])} left out: a run more would take the check past {CHECK_BUDGET_S:.0f} s")
            break
        ok, line = check_strategy(name, len(slots), output)
        tried, passed = tried + 1, passed + ok
        say(line)
    try:
        subprocess.run([sys.executable, "-m", "bench", "report", str(output), "--output", str(output)],
                       capture_output=True, check=False, timeout=REPORT_LIMIT_S)
    except subprocess.TimeoutExpired:
        say(f"the report was not written within {REPORT_LIMIT_S:.0f} s: ./run_bench.sh report {output}")
    fine = seen == len(slots) and passed == len(every)
    say(f"{passed} of {len(every)} strategies ran with every process on GPUs of its own ({len(every) - tried} not "
        f"tried), in {time.monotonic() - began:.0f} s; report: {output / 'report.html'}")
    return 0 if fine else 1
