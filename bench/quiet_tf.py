"""Import TensorFlow with its C++ start-up log lines (oneDNN, CPU features) silenced.

TF 2.21 prints them before absl logging is initialised, so TF_CPP_MIN_LOG_LEVEL
cannot hide them; they would bury the suite's own one-line messages.
"""

import os


def import_tensorflow_quietly() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow as tf

        tf.constant(0)  # the first op initialises the runtime, which logs too
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
