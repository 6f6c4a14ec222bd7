"""The argument list every bare loop takes, and the one line each of its processes writes."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def arguments(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("out", help="folder for this process's result line")
    p.add_argument("--model", default="mlp")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=2000, help="steps in all, warm-up included (global steps for a ps job)")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"))
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--cluster", default="", help="ps:host:port,...;worker:host:port,... for TF clusters")
    p.add_argument("--role", default="worker")
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--sync", action="store_true", help="ps: SyncReplicasOptimizer over all workers")
    return p.parse_args()


def optimizer(name: str, lr: float):
    import tensorflow as tf

    if name == "adam":
        return tf.compat.v1.train.AdamOptimizer(lr)
    return tf.compat.v1.train.GradientDescentOptimizer(lr)


def synthetic_batch(model, batch_size: int, seed: int = 0):
    """One fixed random batch of the model's inputs (what distbench's `synthetic` data is)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.random((batch_size, *model.input_shape), dtype=np.float32)
    y = rng.integers(0, model.num_classes, size=batch_size).astype(np.int32)
    return x, y


def write_result(out: str, name: str, examples: int, start: float, end: float) -> None:
    line = json.dumps({"examples": examples, "start": start, "end": end, "pid": os.getpid()})
    Path(out, f"{name}.json").write_text(line + "\n")


def now() -> float:
    return time.time()


def timed_steps(run: Callable[[], Any], args: argparse.Namespace, name: str, examples_per_step: int,
                warmed: int = 0, read: Callable[[Any], float] = float) -> None:
    """The end of every eager bare loop: the rest of the warm-up, the timed steps, one read of the
    last loss (the only host sync), and this process's result line."""
    for _ in range(args.warmup - warmed):
        run()
    start = now()
    for _ in range(args.steps - args.warmup):
        loss = run()
    read(loss)
    write_result(args.out, name, (args.steps - args.warmup) * examples_per_step, start, now())
