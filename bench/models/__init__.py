"""Model registry: name -> Model class."""

from __future__ import annotations

from bench.errors import UsageError
from bench.models.base import Model
from bench.models.cnn import CNN
from bench.models.mlp import MLP
from bench.models.resnet import ResNet20

MODELS: dict[str, type[Model]] = {"mlp": MLP, "cnn": CNN, "resnet20": ResNet20}


def get(name: str) -> type[Model]:
    try:
        return MODELS[name]
    except KeyError:
        raise UsageError(f"--model: unknown model {name!r}; choose from {', '.join(MODELS)}") from None


def build(name: str, seed: int) -> Model:
    return get(name)(seed)


def build_partitioned(name: str, seed: int, shards: int, min_bytes: int) -> Model:
    """A model whose variables of at least `min_bytes` are split into `shards` pieces."""
    return get(name)(seed, partition=(shards, min_bytes))
