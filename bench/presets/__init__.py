"""Sets of runs with a report at the end: the default comparison, stragglers and failures,
the emulated network; one runner for them all; and the harness-overhead measurement."""
