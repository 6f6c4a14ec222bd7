"""Model registry: name -> Model class, each model found by listing its file's own declaration
(bench.run.models.catalog). The names are known without importing TensorFlow (launchers
validate --model before any worker starts); a class is imported when built.
A model of the user's (`pkg.module:build`, `path/to/file.py:build`, bench.run.models.user) is
imported where it is checked, and reads the inputs its own signature says (SIGNATURE)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from bench.errors import UsageError
from bench.run.data import IDS, IMAGES, SIGNATURE, teacher
from bench.run.models import catalog, user

if TYPE_CHECKING:
    from bench.config import RunConfig
    from bench.run.models.base import Model

# found by listing this package (bench.run.models.catalog): each model file declares its own facts
MODELS: dict[str, str] = {name: m.target for name, m in catalog.declared().items()}
IMAGENET = tuple(name for name, m in catalog.declared().items() if m.imagenet)  # they take --image-size
# the smallest --image-size their strides and valid paddings leave room for
MIN_IMAGE_SIZE = {name: m.min_image_size for name, m in catalog.declared().items() if m.imagenet}
READS = {name: m.reads for name, m in catalog.declared().items()}
DEFAULT_DATA = {IMAGES: "digits", IDS: "synthetic-ids", SIGNATURE: "synthetic"}
# the accuracy whose time to reach is reported when --target-accuracy is not given: the
# embedding model on synthetic-ids plateaus near 0.73 (its teacher's Bayes accuracy is 0.84);
# a user's model on its own data is given the images' (a user sets its own with --target-accuracy)
DEFAULT_TARGET = {IMAGES: 0.9, IDS: 0.7, SIGNATURE: 0.9}


def check(name: str) -> None:
    if user.is_spec(name):
        user.target(name)
        return
    if name not in MODELS:
        raise UsageError(f"--model: unknown model {name!r}; choose from {', '.join(MODELS)}, "
                         "or name your own as pkg.module:build or path/to/file.py:build (docs/your-model.md)")


def resolve(name: str) -> str:
    """The name every process of a run can build the model by: a user's file made absolute."""
    return user.resolve(name) if user.is_spec(name) else name


def label(name: str) -> str:
    """The model's name in run folders and the report."""
    return user.label(name) if user.is_spec(name) else name


def reads(name: str) -> str:
    check(name)
    return SIGNATURE if user.is_spec(name) else READS[name]


def mixed_precision(name: str) -> bool:
    """Whether model `name` computes in a mixed precision: a suite model by its DECLARES; a user's Keras model (built
    under Keras's global dtype policy: bench.run.models.user.dtype_policy); not a user's protocol model."""
    check(name)
    if user.is_spec(name):
        return user.kind(name) == user.KERAS
    return catalog.declared()[name].mixed_precision


def default_data(name: str) -> str:
    """The data a run of this model reads when --data is not given."""
    return DEFAULT_DATA[reads(name)]


def default_target(name: str, data: str | None = None) -> float:
    """The target accuracy of a run of model `name` on `data` when none is given."""
    if data == "teacher":
        return teacher.TARGET
    return DEFAULT_TARGET[reads(name)]


def input_shape(name: str, image_size: int | None = None) -> tuple:
    """Its input's shape per example, at `image_size` if given (imports the model, and with it TensorFlow)."""
    if user.is_spec(name):
        return user.probe(name).input_shape
    shape = get(name).input_shape
    return (image_size, image_size, shape[2]) if image_size else shape


def signature(name: str) -> user.Probe:
    """Its input's shape and dtype, its classes and an integer input's bound (imports TensorFlow; a
    user's model is built once)."""
    if user.is_spec(name):
        return user.probe(name)
    cls = get(name)
    return user.Probe(user.PROTOCOL, tuple(cls.input_shape), cls.input_dtype.as_numpy_dtype.__name__,
                      cls.num_classes, cls.input_high, 0)


def input_dtype(name: str) -> str:
    """Its input's NumPy dtype name (imports TensorFlow)."""
    return signature(name).input_dtype


def check_image_size(name: str, image_size: int | None) -> None:
    """--image-size is for the ImageNet models, and no smaller than their strides leave room for."""
    if image_size is None:
        return
    if name not in IMAGENET:
        raise UsageError(f"--image-size: only for the ImageNet models ({', '.join(IMAGENET)}), not {name}")
    smallest = MIN_IMAGE_SIZE[name]
    if image_size < smallest:
        raise UsageError(f"--image-size: {name} needs at least {smallest}, got {image_size}")


def get(name: str) -> type[Model]:
    """The model's class, or what builds a user's model the same way (seed, partition=..., **sizes)."""
    check(name)
    if user.is_spec(name):
        return user.factory(name)
    module, _, cls = MODELS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def settings(config: RunConfig) -> dict[str, int]:
    """What a run's config says about the model's size: the embedding model's table, an
    ImageNet model's input size."""
    if reads(config.model) == IDS:
        return {"rows": config.embedding_rows, "width": config.embedding_width}
    if config.model in IMAGENET and config.image_size:
        return {"image_size": config.image_size}
    return {}


def table_bytes(config: RunConfig) -> int:
    """Bytes of the model's embedding tables (float32), known before it is built (a user's model is
    built once here to know)."""
    if user.is_spec(config.model):
        return user.probe(config.model).table_bytes
    return 4 * config.embedding_rows * config.embedding_width if reads(config.model) == IDS else 0


def build(name: str, seed: int, **sizes: int) -> Model:
    return get(name)(seed, **sizes)


def for_run(config: RunConfig) -> Model:
    """The model of a run, sized by its config, in its precision (a user's Keras model built under that precision's
    global dtype policy)."""
    with user.dtype_policy(config.precision):
        return in_precision(build(config.model, config.seed, **settings(config)), config)


def build_partitioned(config: RunConfig, shards: int, min_bytes: int) -> Model:
    """A run's model whose variables of at least `min_bytes` are split into `shards` pieces."""
    return in_precision(get(config.model)(config.seed, partition=(shards, min_bytes), **settings(config)), config)


def in_precision(model: Model, config: RunConfig) -> Model:
    """`model` set to compute in the run's precision (--precision) and to compile its gradients with XLA (--xla)."""
    import tensorflow as tf

    from bench.run.models.loss_scale import DynamicLossScale
    from bench.run.models.precision import compute_dtype, scales_loss

    model.compute_dtype = tf.as_dtype(compute_dtype(config.precision))
    model.loss_scale = DynamicLossScale() if scales_loss(config.precision) else None
    model.jit_compile = config.xla
    return model
