"""distbench: one harness, every TensorFlow distribution strategy.

Four kinds of code: run/ (one run: its launch, its training processes, models, data and faults),
drivers/ (many runs: presets, micro-benchmarks, the harness-overhead pairs), analysis/ (report,
projection) and infra/ (this machine's tools and the emulated cluster). The modules here are what
all four share: the command line, a run's config and its one check, the figures' definitions."""

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent  # the folder holding bench/ and strategies/
