"""The uninterrupted 100-step runs that resumed and recovered runs are compared with: one per
strategy and arguments in a test session, made in the background (tests/background.py) as each
takes 10-20 s; the `uninterrupted` fixture hands out their folders."""

from __future__ import annotations

from pathlib import Path

from tests.background import Job, Run, run_to_end
from tests.conftest import only_run

STEPS, SAVE_EVERY = 100, 50
COMMON = ["--model", "mlp", "--data", "digits", "--optimizer", "momentum", "--steps", str(STEPS),
          "--eval-every", "0", "--save-weights", "--checkpoint-every-steps", str(SAVE_EVERY)]


def key(strategy: str, extra: list[str]) -> tuple[str, ...]:
    return ("uninterrupted", strategy, *extra)


def uninterrupted_run(strategy: str, extra: list[str]) -> dict[tuple[str, ...], Job]:
    """The background job of `--strategy STRATEGY COMMON EXTRA`, run to its end: its run folder."""
    results = run_to_end("--strategy", strategy, *COMMON, *extra)

    def job(folder: Path, run: Run) -> Path:
        return only_run(results(folder, run))
    return {key(strategy, extra): job}
