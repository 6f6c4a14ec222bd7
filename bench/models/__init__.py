"""Model registry: name -> Model class. The names are known without importing TensorFlow
(launchers validate --model before any worker starts); a class is imported when built."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from bench.data import IDS, IMAGES, teacher
from bench.errors import UsageError

if TYPE_CHECKING:
    from bench.config import RunConfig
    from bench.models.base import Model

MODELS: dict[str, str] = {"mlp": "bench.models.mlp:MLP", "cnn": "bench.models.cnn:CNN",
                          "resnet20": "bench.models.resnet:ResNet20",
                          "embedding": "bench.models.embedding:Embedding"}
READS = {"mlp": IMAGES, "cnn": IMAGES, "resnet20": IMAGES, "embedding": IDS}  # the kind of data (bench.data)
DEFAULT_DATA = {IMAGES: "digits", IDS: "synthetic-ids"}
# the accuracy whose time to reach is reported when --target-accuracy is not given: the
# embedding model on synthetic-ids plateaus near 0.73 (its teacher's Bayes accuracy is 0.84)
DEFAULT_TARGET = {IMAGES: 0.9, IDS: 0.7}


def check(name: str) -> None:
    if name not in MODELS:
        raise UsageError(f"--model: unknown model {name!r}; choose from {', '.join(MODELS)}")


def reads(name: str) -> str:
    check(name)
    return READS[name]


def default_data(name: str) -> str:
    """The data a run of this model reads when --data is not given."""
    return DEFAULT_DATA[reads(name)]


def default_target(name: str, data: str | None = None) -> float:
    """The target accuracy of a run of model `name` on `data` when none is given."""
    if data == "teacher":
        return teacher.TARGET
    return DEFAULT_TARGET[reads(name)]


def input_shape(name: str) -> tuple:
    """Its input's shape per example (imports the model, and with it TensorFlow)."""
    return get(name).input_shape


def get(name: str) -> type[Model]:
    check(name)
    module, _, cls = MODELS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def settings(config: RunConfig) -> dict[str, int]:
    """What a run's config says about the model's size (only the embedding model has any)."""
    if reads(config.model) == IDS:
        return {"rows": config.embedding_rows, "width": config.embedding_width}
    return {}


def table_bytes(config: RunConfig) -> int:
    """Bytes of the model's embedding tables (float32), known before it is built."""
    return 4 * config.embedding_rows * config.embedding_width if reads(config.model) == IDS else 0


def build(name: str, seed: int, **sizes: int) -> Model:
    return get(name)(seed, **sizes)


def for_run(config: RunConfig) -> Model:
    """The model of a run, sized by its config."""
    return build(config.model, config.seed, **settings(config))


def build_partitioned(config: RunConfig, shards: int, min_bytes: int) -> Model:
    """A run's model whose variables of at least `min_bytes` are split into `shards` pieces."""
    return get(config.model)(config.seed, partition=(shards, min_bytes), **settings(config))
