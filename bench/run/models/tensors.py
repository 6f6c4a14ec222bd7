"""A registered model's gradient tensors as the projection needs them: each trainable
variable's bytes, its place in creation order (how replica_device_setter meets them), and
when in the backward pass its gradient is ready.

Readiness comes from the forward graph at the model's own input size, traced once at
batch 1: each convolution and matrix product costs 2 x output elements x reduction size
FLOPs, and the backward pass visits the layers in reverse, in time proportional to those
FLOPs (backward FLOPs are twice the forward ones layer by layer, so the shares are the
same). A variable's gradient is ready once the backward pass has done every op from the
end of the forward graph down to the first op that reads the variable.

An embedding table's gradient is sparse: a step sends the rows its batch touched (with their
indices) and reads those rows back, not the table. How many rows a batch touches is a fact of
the data, not of the graph: the runs record it (bench.metrics.Gradient), and `sized` gives the
tensors those bytes."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from bench import CHECKOUT
from bench.infra.tools import suite_cache
from bench.metrics import INDEX_BYTES, Gradient

COMPUTE_OPS = ("Conv2D", "MatMul", "DepthwiseConv2dNative", "BatchMatMulV2")
PASS_THROUGH = ("Identity", "Cast", "ReadVariableOp")


@dataclass(frozen=True)
class Tensor:
    name: str
    nbytes: int
    ready: float  # share of the backward pass done when its gradient is ready, 0..1
    table: bool = False  # an embedding table: a step touches a few of its rows
    # a table's step, once the touched rows are known (ModelTensors.sized): its sparse gradient (the touched
    # rows with their indices), the ids a ps looks them up by, and the rows read back; all 0: not known, or
    # sent dense (the table's gradient goes whole)
    slices_bytes: float = 0.0
    ids_bytes: float = 0.0
    rows_bytes: float = 0.0

    @property
    def sparse(self) -> bool:
        return self.slices_bytes > 0

    @property
    def push_bytes(self) -> float:
        """What one worker sends of it per step to a ps (bench.metrics.ps_worker_bytes)."""
        return self.slices_bytes + self.ids_bytes if self.sparse else self.nbytes

    @property
    def pull_bytes(self) -> float:
        """What one worker reads of it per step from a ps."""
        return self.rows_bytes if self.sparse else self.nbytes


@dataclass(frozen=True)
class ModelTensors:
    model: str
    tensors: tuple[Tensor, ...]  # in creation order
    forward_gflops: float  # per example

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    def ready_at_end(self) -> ModelTensors:
        """Every gradient ready when the backward pass ends: an exchange that starts only then."""
        return replace(self, tensors=tuple(replace(t, ready=1.0) for t in self.tensors))

    def in_ready_order(self) -> list[Tensor]:
        return sorted(self.tensors, key=lambda t: t.ready)

    @property
    def has_table(self) -> bool:
        return any(t.table for t in self.tensors)

    @property
    def sparse(self) -> bool:
        return any(t.sparse for t in self.tensors)

    def sized(self, gradient: Gradient) -> ModelTensors:
        """The tensors at a run's recorded sizes (bench.metrics.Gradient): the dense ones scaled to its
        dense bytes and the tables to its table bytes, each keeping its share and its place in the
        backward pass (a model built at another size than the one traced here, e.g. the embedding
        model's --embedding-rows), and the tables' touched rows split over them by bytes."""
        dense = sum(t.nbytes for t in self.tensors if not t.table)
        table = sum(t.nbytes for t in self.tensors if t.table)
        out = []
        for t in self.tensors:
            if t.table and table:
                share = t.nbytes / table
                out.append(replace(t, nbytes=round(gradient.table_bytes * share),
                                   slices_bytes=gradient.slices_bytes * share,
                                   ids_bytes=gradient.rows_touched * INDEX_BYTES * share,
                                   rows_bytes=gradient.rows_bytes * share))
            else:
                out.append(replace(t, nbytes=round(t.nbytes * gradient.dense_bytes / dense) if dense else 0))
        return replace(self, tensors=tuple(out))

    def partitioned(self, shards: int, min_bytes: int) -> ModelTensors:
        """Each tensor of at least `min_bytes` split into `shards` pieces in place, each its own variable to
        place on a ps task, as a ps run's `--ps-partition-mb` builds them (bench.run.models.base:
        tf.compat.v1.fixed_size_partitioner(shards) along the first axis), their rows as even as it
        makes them; a table's touched rows spread over its pieces by bytes."""
        out: list[Tensor] = []
        for t in self.tensors:
            if shards < 2 or t.nbytes < min_bytes:
                out.append(t)
                continue
            for i in range(shards):
                share = 1 / shards
                out.append(replace(t, name=f"{t.name}/part_{i}", nbytes=round(t.nbytes * share),
                                   slices_bytes=t.slices_bytes * share, ids_bytes=t.ids_bytes * share,
                                   rows_bytes=t.rows_bytes * share))
        return replace(self, tensors=tuple(out))

    def dense(self) -> ModelTensors:
        """Every gradient sent whole, the tables' too (Horovod's sparse_as_dense)."""
        return replace(self, tensors=tuple(replace(t, slices_bytes=0.0, ids_bytes=0.0, rows_bytes=0.0)
                                           for t in self.tensors))


def _flops(op) -> float:
    out = op.outputs[0].shape
    if op.type in ("Conv2D", "DepthwiseConv2dNative"):
        kernel = op.inputs[1].shape
        reduction = kernel[0] * kernel[1] * (kernel[2] if op.type == "Conv2D" else 1)
    else:
        a = op.inputs[0].shape
        reduction = a[-2] if op.get_attr("transpose_a" if op.type == "MatMul" else "adj_x") else a[-1]
    return 2.0 * float(np.prod(out[1:])) * reduction


def _variable_read(tensor, handles: dict) -> object | None:
    """The variable a tensor is a read of (through identities and casts), or None."""
    while tensor.op.type in PASS_THROUGH:
        if tensor.op.type == "ReadVariableOp":
            return handles.get(id(tensor.op.inputs[0]))
        tensor = tensor.op.inputs[0]
    return None


def analyse(model) -> ModelTensors:
    """Trace `model`'s forward pass at its input shape and place each trainable variable in it."""
    import tensorflow as tf

    function = tf.function(lambda x: model.logits(x, training=True))
    graph = function.get_concrete_function(tf.TensorSpec((1, *model.input_shape), model.input_dtype)).graph
    by_id = {id(v.handle): v for v in model.trainables}
    handles = {id(internal): by_id[id(external)] for external, internal in graph.captures if id(external) in by_id}
    first_use: dict[int, int] = {}
    flops = []
    for index, op in enumerate(graph.get_operations()):
        flops.append(_flops(op) if op.type in COMPUTE_OPS else 0.0)
        for tensor in op.inputs:
            var = _variable_read(tensor, handles) if op.type != "ReadVariableOp" else None
            if var is not None:
                first_use.setdefault(id(var), index)
    after = np.cumsum(flops[::-1])[::-1]  # FLOPs of every op from index i to the end
    total = float(after[0])
    tables = {id(t) for t in model.tables}
    tensors = tuple(Tensor(v.name.split(":")[0], 4 * int(np.prod(v.shape)),
                           float(after[first_use.get(id(v), 0)]) / total, id(v) in tables) for v in model.trainables)
    return ModelTensors(type(model).__name__.lower(), tensors, total / 1e9)


def cache_folder() -> Path:
    """Where analysed models are kept between processes (beside setup's Horovod wheel)."""
    return suite_cache() / "model-tensors"


def _tensorflow_version() -> str:
    """Read without importing TensorFlow, so a projection from the cache need not."""
    from bench.infra.tools import tensorflow_version

    installed = tensorflow_version()
    if installed:
        return installed
    import tensorflow as tf

    return tf.__version__


@functools.cache
def _source_key() -> str:
    """Changes whenever the models' code, this analysis or TensorFlow does."""
    digest = hashlib.sha256(_tensorflow_version().encode())
    for path in sorted([*(CHECKOUT / "bench" / "run" / "models").glob("*.py"), Path(__file__)]):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _built(name: str, sizes: dict[str, int]):
    """Model `name` built at `sizes`, TensorFlow imported and started quietly (its C++ start-up lines
    would bury the projection's table)."""
    from bench.run import models
    from bench.run.quiet_tf import import_tensorflow_quietly, start_runtime_quietly

    import_tensorflow_quietly()
    start_runtime_quietly()
    return models.build(name, 0, **sizes)


@functools.cache
def of(name: str, **sizes: int) -> ModelTensors:
    """The tensors of model `name` built at `sizes` (bench.run.models.settings: the embedding model's
    table, an ImageNet model's input size; none: its defaults): a registered one built and traced
    once, then read from the cache (building VGG-16 initialises 138 million weights)."""
    from bench.run import models

    if models.user.is_spec(name):  # the user's code changes under the same name: analysed every time
        result = analyse(_built(name, sizes))
        return ModelTensors(models.label(name), result.tensors, result.forward_gflops)
    sized = "".join(f"-{key}{value}" for key, value in sorted(sizes.items()))
    path = cache_folder() / f"{name}{sized}-{_source_key()}.json"
    try:
        kept = json.loads(path.read_text())
        return ModelTensors(name, tuple(Tensor(**t) for t in kept["tensors"]), kept["forward_gflops"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    result = analyse(_built(name, sizes))
    result = ModelTensors(name, result.tensors, result.forward_gflops)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps({"tensors": [asdict(t) for t in result.tensors],
                                       "forward_gflops": result.forward_gflops}))
        partial.replace(path)  # whole or not at all, whoever else writes it at the same time
    except OSError:
        pass  # a read-only cache costs the build next time, nothing else
    return result


def forward_flops(config) -> float | None:
    """FLOPs of one example's forward pass of a run's model (as the projection counts them: `of`),
    traced in a graph of its own, so that a training process's graph is untouched; None where the
    model cannot be traced so (a user's Keras model outside eager code)."""
    import tensorflow as tf

    from bench.run import models

    try:
        with tf.Graph().as_default():
            return of(config.model, **models.settings(config)).forward_gflops * 1e9
    except Exception:  # noqa: BLE001 - a figure the run can go without; its summary then says unknown
        return None
