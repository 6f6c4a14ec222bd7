"""The uninterrupted 100-step runs that resumed and recovered runs are compared with: made once
per test session per strategy (the `uninterrupted` fixture), as each takes 10-20 s."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import only_run
from tests.processes import bench

STEPS, SAVE_EVERY = 100, 50
COMMON = ["--model", "mlp", "--data", "digits", "--optimizer", "momentum", "--steps", str(STEPS),
          "--eval-every", "0", "--save-weights", "--checkpoint-every-steps", str(SAVE_EVERY)]


class UninterruptedRuns:
    def __init__(self, folder: Path) -> None:
        self.folder, self.made = folder, {}

    def __call__(self, strategy: str, extra: list[str]) -> Path:
        """The run folder of `--strategy STRATEGY COMMON EXTRA`, run to its end."""
        key = (strategy, *extra)
        if key not in self.made:
            out = self.folder / f"{strategy}-{len(self.made)}"
            done = bench("--strategy", strategy, *COMMON, *extra, "--output", str(out))
            assert done.returncode == 0, done.stderr[-3000:]
            self.made[key] = only_run(out)
        return self.made[key]
