"""Model registry: name -> Model class. The names are known without importing TensorFlow
(launchers validate --model before any worker starts); a class is imported when built."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from bench.errors import UsageError

if TYPE_CHECKING:
    from bench.models.base import Model

MODELS: dict[str, str] = {"mlp": "bench.models.mlp:MLP", "cnn": "bench.models.cnn:CNN",
                          "resnet20": "bench.models.resnet:ResNet20"}


def check(name: str) -> None:
    if name not in MODELS:
        raise UsageError(f"--model: unknown model {name!r}; choose from {', '.join(MODELS)}")


def get(name: str) -> type[Model]:
    check(name)
    module, _, cls = MODELS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def build(name: str, seed: int) -> Model:
    return get(name)(seed)


def build_partitioned(name: str, seed: int, shards: int, min_bytes: int) -> Model:
    """A model whose variables of at least `min_bytes` are split into `shards` pieces."""
    return get(name)(seed, partition=(shards, min_bytes))
