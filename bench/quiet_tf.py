"""TensorFlow's C++ start-up log lines (oneDNN, CPU features), silenced.

TF 2.21 prints them before absl logging is initialised, so TF_CPP_MIN_LOG_LEVEL
cannot hide them; they would bury the suite's own one-line messages.
"""

import contextlib
import os
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
    with quiet_stderr():
        import tensorflow  # noqa: F401


def start_runtime_quietly() -> None:
    import tensorflow as tf

    with quiet_stderr():
        tf.constant(0)
