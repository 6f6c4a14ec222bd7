"""Drivers of many runs: the presets (the default comparison, stragglers and failures, the
emulated network, trade-offs), the communication micro-benchmarks, and the harness-overhead pairs."""
