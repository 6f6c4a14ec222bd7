"""Sets of runs with a report at the end: the default comparison, stragglers and failures,
the emulated network, trade-offs; one runner for them all."""
