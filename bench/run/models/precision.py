"""The precisions a run trains in (--precision) and what each means, defined once: the dtype a model computes
in (its variables stay float32, as Keras's mixed-precision policies keep them), whether its step scales its loss
(float16's narrow exponent underflows small gradients: a dynamic scale, bench.run.models.loss_scale, as Keras's
mixed_float16 policy gets from its LossScaleOptimizer; bfloat16 keeps float32's exponent and needs none), and the
dtype of the peak its MFU divides by."""

from __future__ import annotations

FLOAT32, MIXED_FLOAT16, MIXED_BFLOAT16 = "float32", "mixed_float16", "mixed_bfloat16"
PRECISIONS = (FLOAT32, MIXED_FLOAT16, MIXED_BFLOAT16)  # Keras's policy names
COMPUTE_DTYPE = {FLOAT32: "float32", MIXED_FLOAT16: "float16", MIXED_BFLOAT16: "bfloat16"}


def compute_dtype(precision: str) -> str:
    return COMPUTE_DTYPE[precision]


def scales_loss(precision: str) -> bool:
    return precision == MIXED_FLOAT16
