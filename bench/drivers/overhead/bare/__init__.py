"""Minimal training loops, one per family, written the way a user would without distbench:
no records, no stamps, no progress; the model is distbench's, so the arithmetic is the same.

Each process runs `warmup` steps, then times its steps and writes one JSON line
(`examples`, `start`, `end`, epoch seconds) into the folder it is given; the caller adds
the processes' examples and divides by the span from the first start to the last end,
as the harness's throughput does with its rows."""
