"""Two facts of a ps-family graph's variables, read from its ops: the ps task a device names, and
the bytes a variable handle holds (the balanced placement, the bytes per ps task and a traced
step's tensors all read them here)."""

from __future__ import annotations

import re

import tensorflow as tf


def ps_task(device: str) -> int | None:
    """The ps task of a device string ("/job:ps/replica:0/task:1/..." or "/job:ps/task:1"), else None."""
    found = re.search(r"/job:ps/(?:replica:\d+/)?task:(\d+)", device or "")
    return int(found.group(1)) if found else None


def handle_bytes(op: tf.Operation) -> int:
    """Bytes of the variable a VarHandleOp makes (0 where its shape is not fully defined)."""
    shape = tf.TensorShape(op.get_attr("shape"))
    return (shape.num_elements() or 0) * tf.as_dtype(op.get_attr("dtype")).size
