"""What a budgeted comparison measures of the machine before its first run: for each model, one short run
of the baseline strategy at 1 worker (its global step on this machine), and what a run costs outside
its steps (process start, TensorFlow's import, the model's build and warm-up, the teardown). A few
seconds; the runs go to a folder of their own, inside the comparison's (inside a Slurm allocation the nodes see it;
they would not see this machine's /tmp), removed before the report reads the comparison's."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.drivers.presets.budget import LEAST_MEASURED_STEPS, Probed, global_step_s
from bench.drivers.presets.runner import execute, run_folders
from bench.run.process.records import RunFolder

WARMUP = 5  # the step of a probe is read after its first steps (tracing, the first batch)


def probe(baseline: str, models: Sequence[tuple[str, str]], batch_size: int, timeout_s: float, output: Path,
          extra: Sequence[str] = ()) -> Probed:
    """The baseline's step per model (`models`: (model, data) pairs) and a run's start-up, measured with the
    comparison's own run flags (`extra`: --on-cpu, --precision, ...) in a folder inside its `output`."""
    step_s, startup_s = {}, []
    output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".probe-", dir=output) as tmp:
        out = Path(tmp)
        for model, data in models:
            print(f"probe: {baseline} {model} x1, {LEAST_MEASURED_STEPS + WARMUP} steps", file=sys.stderr, flush=True)
            began = time.monotonic()
            before = run_folders(out)
            execute(["--strategy", baseline, "--model", model, "--data", data, "--workers", "1",
                     "--steps", str(LEAST_MEASURED_STEPS + WARMUP), "--warmup-steps", str(WARMUP),
                     "--batch-size", str(batch_size), "--eval-every", "0", "--purpose", "throughput",
                     "--output", str(out), *extra], timeout_s, out, out / "probe.log")
            wall_s = time.monotonic() - began
            summary = next((RunFolder(p).read_run().get("summary") or {} for p in run_folders(out) - before), {})
            step = global_step_s(summary)
            if step is None:
                tail = (out / "probe.log").read_text(errors="replace").strip().splitlines()[-1:]
                raise RuntimeError(f"the probe's run of {model} gave no throughput: {' '.join(tail)}")
            step_s[model] = step
            startup_s.append(max(0.0, wall_s - (summary["global_steps"] - WARMUP) * step))
    return Probed(step_s, statistics.median(startup_s))
