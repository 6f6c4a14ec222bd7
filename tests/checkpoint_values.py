"""What a run's checkpoints hold, read back with TensorFlow's own reader (for the tests)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import tensorflow as tf

from bench.run.process.checkpoints import CHECKPOINT_DIR, CHECKPOINTS_FILE
from tests.reference_runs import SAVE_EVERY, STEPS


def latest(run_dir) -> tuple[int, dict[str, np.ndarray]]:
    """The latest checkpoint's global step and values, named as each format names them:
    object-based (eager strategies) `model/NAME/.ATTRIBUTES/...`, a graph Saver's `NAME`."""
    prefix = tf.train.latest_checkpoint(str(run_dir / CHECKPOINT_DIR))
    assert prefix is not None
    reader = tf.train.load_checkpoint(prefix)
    values = {}
    for name in reader.get_variable_to_shape_map():
        short = name.removeprefix("model/").replace("/.ATTRIBUTES/VARIABLE_VALUE", "")
        values[short.replace("/.OPTIMIZER_SLOT/optimizer/", "/").lower()] = reader.get_tensor(name)
    return int(values.pop("global_step")), values


def assert_holds_the_final_weights(run_dir, values: dict[str, np.ndarray], slots: bool = True) -> None:
    weights = np.load(run_dir / "weights.npz")
    saved = {k: v for k, v in values.items() if "/" not in k and k.startswith(("hid", "sm"))}
    assert len(saved) == len(weights.files)
    for name in weights.files:
        assert any(v.shape == weights[name].shape and np.array_equal(v, weights[name]) for v in saved.values())
    for name in saved:  # and each weight's momentum slot
        assert not slots or f"{name}/momentum" in values


def assert_same_weights(run_dir: Path, expected_run: Path) -> None:
    """The final weights (weights.npz, --save-weights) of two runs agree to float-sum order."""
    expected, got = np.load(expected_run / "weights.npz"), np.load(run_dir / "weights.npz")
    assert expected.files == got.files
    for name in expected.files:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6)


def assert_saved_the_chief_s_state(run_dir) -> None:
    """A save at each multiple of the period and one at the end, the latest holding the final
    weights and a momentum slot of each (where the optimizer has one)."""
    saves = pd.read_csv(run_dir / CHECKPOINTS_FILE)
    assert list(saves["global_step"]) == [SAVE_EVERY, STEPS]
    step, values = latest(run_dir)
    assert step == STEPS
    config = json.loads((run_dir / "run.json").read_text())["config"]
    assert_holds_the_final_weights(run_dir, values, slots=config["optimizer"] == "momentum")
