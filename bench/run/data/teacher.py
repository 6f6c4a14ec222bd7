"""`teacher`: a classification task that takes thousands of steps, made offline from a seed.

Each example is drawn from a few latent factors z ~ N(0, I): its image is a fixed smooth
pattern per factor, mixed by z and squashed into [0, 1]; its label is the arg-max of a
fixed random two-layer tanh network over z (the teacher). A student sees only the image,
so it must undo the mixing and learn the teacher's class boundaries. `factors` is the
difficulty knob: every factor adds a dimension the boundaries bend in (docs/convergence.md, "The
teacher task", has steps-to-target per setting).

The task is the same for every run (TASK_SEED, not --seed): strategies and repeats train
on the same examples and are judged on the same validation set; --seed varies their
initial weights and the order they read the examples in.
"""

from __future__ import annotations

import numpy as np

from bench.config import RunConfig
from bench.run.data.arrays import Dataset, Split, to_shape

TASK_SEED = 20260
DEFAULT_FACTORS = RunConfig.teacher_factors
DEFAULT_EXAMPLES = RunConfig.teacher_examples
TEACHER_HIDDEN = 48
SHARPNESS = 0.5
PATTERN_SIDE = 7  # each factor's pattern is a random 7x7 grid, upscaled to the model's input
CLASSES = 10
# the default target accuracy on it: mlp (batch 64, SGD 0.1) reaches it after 1,000-2,000
# steps and levels off at 0.83-0.87 (docs/convergence.md, "The teacher task")
TARGET = 0.82


def load(shape: tuple[int, int, int], factors: int = DEFAULT_FACTORS,
         examples: int = DEFAULT_EXAMPLES) -> Dataset:
    rng = np.random.default_rng((TASK_SEED, factors))
    patterns = to_shape(rng.standard_normal((factors, PATTERN_SIDE, PATTERN_SIDE, shape[2])).astype(np.float32),
                        shape).reshape(factors, -1)
    w1 = rng.standard_normal((factors, TEACHER_HIDDEN)) * (SHARPNESS / np.sqrt(factors))
    w2 = rng.standard_normal((TEACHER_HIDDEN, CLASSES))

    def draw(count: int) -> Split:
        z = rng.standard_normal((count, factors)).astype(np.float32)
        images = 1.0 / (1.0 + np.exp(-(z @ patterns) / np.sqrt(factors)))
        labels = np.argmax(np.tanh(z @ w1) @ w2, axis=1).astype(np.int32)
        return Split(images.reshape(count, *shape).astype(np.float32), labels)

    train = draw(examples)
    return Dataset("teacher", train, draw(max(1, examples // 5)))
