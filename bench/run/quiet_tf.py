"""Importing TensorFlow in a process that trains: quietly, and without Keras.

TF 2.21 prints C++ start-up lines (oneDNN, CPU features) before absl logging is
initialised, so TF_CPP_MIN_LOG_LEVEL cannot hide them; they would bury the suite's own
one-line messages.

`import tensorflow` also imports Keras eagerly (`keras.src.optimizers`, which also imports
scikit-learn wherever it is installed), only to register Keras optimizers for SavedModel;
the suite uses no Keras.
That was 2.2 of the import's 6 s on the project's 2-core machine, paid by every ps task,
worker and rank. The module is hidden for the import (TensorFlow catches the ImportError
and goes on) and nothing else: Keras still imports as usual afterwards, if anything asks.

The import allocates a few hundred thousand objects that live as long as the process, and
Python's collector walked them again and again while they were made: with the collector off
for the import, it took 2.4 CPU-s instead of 2.85 (medians of 5 alternated imports each on
the project's 2-core machine). They are frozen afterwards, so later collections skip them too.
"""

import contextlib
import gc
import os
import sys
import types
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def import_tensorflow_quietly() -> None:
    """Import only: the runtime must stay uninitialised until devices are configured."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" in sys.modules:
        return
    hidden = "keras.src.optimizers"
    eager_keras = sys.modules.setdefault(hidden, None)
    collecting = gc.isenabled()
    gc.disable()
    try:
        with quiet_stderr():
            import tensorflow  # noqa: F401
    finally:
        if eager_keras is None and sys.modules.get(hidden, 0) is None:
            del sys.modules[hidden]
        gc.freeze()
        if collecting:
            gc.enable()


def start_runtime_quietly() -> None:
    import tensorflow as tf

    with quiet_stderr():
        tf.constant(0)


KERAS_ONLY = "horovod.tensorflow.sync_batch_norm"


class _KerasLayerLeftOut:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise ImportError(f"{KERAS_ONLY} was left out of this process's Horovod import (it needs Keras)")


def import_horovod_without_keras() -> None:
    """Import horovod.tensorflow without the Keras it pulls in through `sync_batch_norm`, whose
    one class subclasses a Keras layer (1.4 s of every rank's start-up on the project's 2-core
    machine; the suite uses no Keras). The module stands in for the import only: an explicit
    import of it later imports the real one."""
    import_tensorflow_quietly()
    if "horovod.tensorflow" in sys.modules:
        return
    stand_in = types.ModuleType(KERAS_ONLY)
    stand_in.SyncBatchNormalization = _KerasLayerLeftOut
    sys.modules[KERAS_ONLY] = stand_in
    try:
        import horovod.tensorflow  # noqa: F401
    finally:
        if sys.modules.get(KERAS_ONLY) is stand_in:
            del sys.modules[KERAS_ONLY]
