"""A model the user brings: `--model pkg.module:build` or `--model path/to/file.py:build`.

The named object is either a subclass of bench.run.models.base.Model (the suite's own protocol,
built like a registered model), or a function, `build()` or `build(seed)`, returning such a
model or a compiled Keras 3 model (bench.run.models.keras_model wraps it). A file path is made
absolute where the run is started, so every process of the run, in any working directory,
imports the same file; a module is imported from the working directory or the installed
packages, as Python's own `-m` finds it."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import UsageError

if TYPE_CHECKING:
    from bench.run.models.base import Model

SEPARATOR = ":"
KERAS, PROTOCOL = "keras", "protocol"  # the two kinds of model a user may bring


def is_spec(name: str) -> bool:
    """A model named by where its code is, not a registered name."""
    return SEPARATOR in name


def split(spec: str) -> tuple[str, str]:
    where, _, attribute = spec.rpartition(SEPARATOR)
    if not where or not attribute.isidentifier():
        raise UsageError(f"--model {spec}: write pkg.module:build or path/to/file.py:build")
    return where, attribute


def resolve(spec: str) -> str:
    """The spec every process of the run can import: a file's path made absolute."""
    where, attribute = split(spec)
    if where.endswith(".py"):
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise UsageError(f"--model {spec}: no file {where}")
        return f"{path}{SEPARATOR}{attribute}"
    return spec


def label(spec: str) -> str:
    """A short name for run folders and the report: the file's or module's last name, and the
    function's unless it is `build`."""
    where, attribute = split(spec)
    stem = Path(where).stem if where.endswith(".py") else where.rpartition(".")[2]
    return stem if attribute == "build" else f"{stem}.{attribute}"


def _import(where: str, spec: str):
    from bench.run.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()  # before the user's module imports it, with Keras and its start-up lines
    if where.endswith(".py"):
        path = Path(where)
        name = "distbench_user_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
        if name in sys.modules:
            return sys.modules[name]
        loader = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))  # its own imports of the files beside it
        try:
            loader.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(where)


@functools.cache
def target(spec: str) -> Any:
    """The object a spec names (imports its module, and with it whatever that imports)."""
    where, attribute = split(spec)
    try:
        module = _import(where, spec)
    except ModuleNotFoundError as exc:
        raise UsageError(f"--model {spec}: cannot import {where} ({exc})") from None
    except Exception as exc:  # the user's module failed as it was imported
        raise UsageError(f"--model {spec}: importing {where} failed: {type(exc).__name__}: {exc}") from None
    found = getattr(module, attribute, None)
    if found is None or not callable(found):
        raise UsageError(f"--model {spec}: {where} has no function or Model class {attribute!r}")
    return found


def _is_protocol_class(found: Any) -> bool:
    from bench.run.models.base import Model

    return isinstance(found, type) and issubclass(found, Model)


def factory(spec: str) -> Callable[..., Model]:
    """What builds the model: called as a registered model's class is, (seed, partition=..., **sizes)."""
    found = target(spec)
    if _is_protocol_class(found):
        return found

    def build(seed: int, partition: tuple[int, int] | None = None, **sizes: int) -> Model:
        if partition:
            raise UsageError(f"--model {spec}: a model built by a function cannot be partitioned over ps tasks; "
                             "name a bench.run.models.base.Model subclass to partition it")
        return built_by_function(spec, found, seed)

    return build


def built_by_function(spec: str, function: Callable, seed: int) -> Model:
    """The user's function's model, its random initial weights fixed by the run's seed (the same in
    every process of the run)."""
    import numpy as np
    import tensorflow as tf

    from bench.run.models.base import Model

    np.random.seed(seed)
    tf.random.set_seed(seed)
    keras = _keras()
    if keras is not None:
        keras.utils.set_random_seed(seed)
    takes_seed = bool(inspect.signature(function).parameters)
    model = function(seed) if takes_seed else function()
    if isinstance(model, Model):
        return model
    if keras is not None and isinstance(model, keras.Model):
        from bench.run.models.keras_model import KerasModel

        return KerasModel(model, label(spec))
    raise UsageError(f"--model {spec}: it returned a {type(model).__name__}, not a bench.run.models.base.Model "
                     "or a keras.Model")


@contextlib.contextmanager
def dtype_policy(precision: str) -> Iterator[None]:
    """Keras's global dtype policy set to `precision` (Keras's names: float32, mixed_float16, mixed_bfloat16) while a
    user's Keras model is built, as Keras users set it before building theirs; the earlier one after. A layer given a
    dtype of its own keeps it (its run records each layer's: KerasModel.dtype_policies)."""
    keras = _keras()
    if keras is None:
        yield
        return
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(before)


def _keras():
    try:
        import keras
    except ImportError:
        return None
    return keras if int(keras.__version__.split(".")[0]) >= 3 else None


@dataclass(frozen=True)
class Probe:
    """What the launcher and the data need to know of a user's model, read from one built with seed 0."""

    kind: str  # KERAS or PROTOCOL
    input_shape: tuple[int, ...]
    input_dtype: str  # NumPy's name of it
    num_classes: int
    input_high: int | None
    table_bytes: int

    @classmethod
    def of(cls, model: Model) -> Probe:
        wrapper = sys.modules.get("bench.run.models.keras_model")  # imported if and only if a Keras model was wrapped
        is_keras = wrapper is not None and isinstance(model, wrapper.KerasModel)
        return cls(KERAS if is_keras else PROTOCOL, tuple(int(d) for d in model.input_shape),
                   model.input_dtype.as_numpy_dtype.__name__, int(model.num_classes),
                   None if model.input_high is None else int(model.input_high), int(model.table_bytes))


def _runtime_started() -> bool:
    if "tensorflow" not in sys.modules:
        return False
    from tensorflow.python.eager import context

    return context.context()._context_handle is not None


def probe_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The probe child's environment: TensorFlow quiet, and no GPU (it needs the model's shapes only; CUDA started
    on every GPU with TensorFlow's defaults fails on busy or exclusive-mode GPUs, and holds memory meanwhile)."""
    return {**environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "-1"}


@functools.cache
def probe(spec: str) -> Probe:
    """The spec's model built once with seed 0: here if this process's TensorFlow runtime is already
    started (a worker, after its devices were configured), else in a child process, since building
    starts the runtime and a launcher that trains in-process configures its devices first (a split of
    the CPU into towers cannot be made after)."""
    if _runtime_started():
        return Probe.of(factory(spec)(0))
    target(spec)  # a spec that does not import is refused here, in one line
    done = subprocess.run([sys.executable, "-m", "bench.run.models.probe", spec], capture_output=True, text=True,
                          env=probe_environment(os.environ), cwd=os.getcwd())
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"it exited with status {done.returncode}"])[-1]
        raise UsageError(f"--model {label(spec)}: building it failed: {last.removeprefix('bench: error: ')}")
    fields = json.loads(done.stdout.strip().splitlines()[-1])
    return Probe(**{**fields, "input_shape": tuple(fields["input_shape"])})


def kind(spec: str) -> str:
    """KERAS or PROTOCOL: what the spec builds."""
    return probe(spec).kind
