"""The precisions a run trains in (--precision) and what each means, defined once: the dtype a model computes
in (its variables stay float32, as Keras's mixed-precision policies keep them), the loss scale a float16 step
multiplies its loss by and divides its gradients by, and the dtype of the peak its MFU divides by."""

from __future__ import annotations

FLOAT32, MIXED_FLOAT16, MIXED_BFLOAT16 = "float32", "mixed_float16", "mixed_bfloat16"
PRECISIONS = (FLOAT32, MIXED_FLOAT16, MIXED_BFLOAT16)  # Keras's policy names
COMPUTE_DTYPE = {FLOAT32: "float32", MIXED_FLOAT16: "float16", MIXED_BFLOAT16: "bfloat16"}
# float16's narrow exponent underflows small gradients: the loss is multiplied by this before the backward pass
# and each gradient divided by it after, as tf_cnn_benchmarks does with --use_fp16 (benchmark_cnn.py's
# --fp16_loss_scale: "the loss is multiplied by this amount right before gradients are computed, then each
# gradient is divided by this amount"; unset, a model's own scale, "The default loss scale of 128" in the
# comment beside it). bfloat16 keeps float32's exponent and needs none.
LOSS_SCALE = {FLOAT32: 1.0, MIXED_FLOAT16: 128.0, MIXED_BFLOAT16: 1.0}


def compute_dtype(precision: str) -> str:
    return COMPUTE_DTYPE[precision]


def loss_scale(precision: str) -> float:
    return LOSS_SCALE[precision]
