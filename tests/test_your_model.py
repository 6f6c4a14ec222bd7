"""A model of the user's (`--model path/to/file.py:build`, docs/your-model.md): the suite's own protocol
under every strategy, a compiled Keras 3 model under every strategy that can build one, the user's arrays
(`--data file.npz`), and the refusals, each one line and exit 2 before any work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main
from bench.errors import UsageError
from strategies import registry
from tests.background import Run, run_to_end
from tests.conftest import ROOT, only_run
from tests.equivalence import assert_weights_close, config_for, initial_weights, load_weights, train_in_process

WIDE_DEEP = str(ROOT / "examples" / "wide_deep.py") + ":build"
TABULAR = str(ROOT / "examples" / "tabular_net.py") + ":TabularNet"
ENCODER = str(ROOT / "examples" / "keras_encoder.py") + ":build"
B = 16
KERAS_STRATEGIES = sorted(name for name, cls in registry.all_strategies().items() if not cls.v1_graph)


def write_clicks(folder: Path) -> str:
    """Arrays of the wide-and-deep example's kind: 16 ids per example, a click when their sum is odd."""
    from examples import wide_deep

    rng = np.random.default_rng(0)
    x = rng.integers(0, wide_deep.VOCABULARY, size=(400, wide_deep.FEATURES)).astype(np.int64)
    path = folder / "clicks.npz"
    np.savez(path, x=x, y=(x.sum(axis=1) % 2).astype(np.int64))
    return str(path)


def write_tabular(folder: Path) -> str:
    from examples import tabular_net

    x, y = tabular_net.example_arrays(400)
    path = folder / "tabular.npz"
    np.savez(path, x=x, y=y)
    return str(path)


@pytest.fixture(scope="module")
def clicks(tmp_path_factory) -> str:
    return write_clicks(tmp_path_factory.mktemp("clicks"))


@pytest.fixture(scope="module")
def tabular(tmp_path_factory) -> str:
    return write_tabular(tmp_path_factory.mktemp("tabular"))


RANKS = [("allreduce", []), ("allreduce-tf", []), ("local-sgd", ["--sync-period", "1"])]


def one_step_of_two(strategy: str, extra: list[str], model: str, write_data):
    """The background job of a 2-worker, 1-step run of `model` on the arrays `write_data` writes:
    the run's folder (tests/background.py: only what it computed is checked)."""
    def job(folder: Path, run: Run) -> Path:
        one_step = run_to_end("--strategy", strategy, "--workers", "2", *extra, "--model", model,
                              "--data", write_data(folder), "--batch-size", str(B), "--steps", "1",
                              "--warmup-steps", "0", "--no-shuffle", "--lr", "0.1", "--save-weights")
        return only_run(one_step(folder, run))
    return job


def background_jobs(item) -> dict:
    if item.originalname == "test_two_ranks_of_the_keras_example_step_as_one_single_step_of_the_whole_batch":
        strategy, extra = item.callspec.params["strategy"], item.callspec.params["extra"]
        return {("keras ranks", strategy): one_step_of_two(strategy, extra, WIDE_DEEP, write_clicks)}
    if item.originalname == "test_the_protocol_example_steps_under_ps_sync_as_one_single_step_of_the_whole_batch":
        return {"protocol ps-sync": one_step_of_two("ps-sync", ["--ps", "1"], TABULAR, write_tabular)}
    return {}


def keras_model(**compile_args):
    import keras

    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Dense(8, activation="relu")(inputs)))
    if compile_args:
        model.compile(**compile_args)
    return model


def test_a_keras_classifier_keeps_its_loss_and_hands_over_its_tf_variables():
    import keras
    import tensorflow as tf

    from bench.run.models.keras_model import KerasModel

    model = keras_model(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    wrapped = KerasModel(model, "m")
    assert all(isinstance(v, tf.Variable) for v in wrapped.trainables) and len(wrapped.trainables) == 4
    assert wrapped.input_shape == (4,) and wrapped.num_classes == 3 and not wrapped.tables
    x = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 3, size=32).astype(np.int32)
    expected = float(model.evaluate(x, y, batch_size=32, verbose=0))  # Keras' own reading of its loss
    assert float(wrapped.loss(tf.constant(x), tf.constant(y))) == pytest.approx(expected, rel=1e-5)
    summed, correct = wrapped.evaluate(tf.constant(x), tf.constant(y))
    assert float(summed) / 32 == pytest.approx(expected, rel=1e-5)
    assert float(correct) == float((np.argmax(model.predict(x, verbose=0), axis=1) == y).sum())


@pytest.mark.parametrize("compile_args, said", [
    ({}, "compile the Keras model with its loss"),
    ({"loss": "mse"}, "its loss 'mse' is not a classifier's"),
])
def test_a_keras_model_the_suite_cannot_train_is_refused_in_one_line(compile_args, said):
    from bench.run.models.keras_model import KerasModel

    with pytest.raises(UsageError, match=re.escape(said)):
        KerasModel(keras_model(**compile_args), "m")


def test_a_keras_model_of_two_inputs_is_refused():
    import keras

    from bench.run.models.keras_model import KerasModel

    a, b = keras.Input((2,)), keras.Input((2,))
    model = keras.Model([a, b], keras.layers.Dense(2)(keras.layers.Concatenate()([a, b])))
    model.compile(loss="sparse_categorical_crossentropy")
    with pytest.raises(UsageError, match="one keras.Input and one output"):
        KerasModel(model, "m")


def test_the_wide_deep_example_builds_the_same_weights_for_a_seed_and_declares_its_tables():
    from bench.run import models

    first, again = models.build(WIDE_DEEP, 3), models.build(WIDE_DEEP, 3)
    assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(first.weights, again.weights, strict=True))
    assert sorted(t.shape[1] for t in first.tables) == [1, 16] and first.row_bytes == 4 * 17
    probe = models.signature(WIDE_DEEP)
    assert probe.kind == "keras" and probe.input_dtype == "int32" and probe.num_classes == 2
    assert probe.table_bytes == first.table_bytes and probe.input_high == 20_000


@pytest.mark.parametrize("argv, said", [
    (["--model", "examples/no_such_file.py:build"], "--model examples/no_such_file.py:build: no file"),
    (["--model", "examples/wide_deep.py:missing"], "has no function or Model class 'missing'"),
    (["--model", "no_such_package.models:build"], "cannot import no_such_package.models"),
    (["--model", "examples/wide_deep.py:build", "--strategy", "ps-sync", "--workers", "2"],
     f"a Keras 3 model cannot be built in the TensorFlow 1 graph ps-sync trains in; run it with "
     f"{', '.join(KERAS_STRATEGIES)}"),
    (["--model", "examples/wide_deep.py:build", "--data", "digits"], "--data digits: a model of your own reads"),
])
def test_a_model_that_cannot_run_is_refused_in_one_line(argv, said, capsys, results, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main([*argv, "--output", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err, err
    assert not list(results.iterdir())


def test_bad_arrays_are_refused_in_one_line(tmp_path, capsys, results):
    cases = {"keys": ({"inputs": np.zeros((4, 32))}, "no array(s) x, y"),
             "lengths": ({"x": np.zeros((4, 32)), "y": np.zeros(3, np.int32)}, "y must be 4 integer labels"),
             "floats": ({"x": np.zeros((4, 32)), "y": np.zeros(4)}, "y must be 4 integer labels"),
             "shape": ({"x": np.zeros((4, 31)), "y": np.zeros(4, np.int32)},
                       "x's examples are (31,), the model's input is (32,)"),
             "classes": ({"x": np.zeros((4, 32)), "y": np.arange(4) * 2}, "y has label 6, the model has 5 classes")}
    for name, (arrays, said) in cases.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, **arrays)
        assert main(["--model", TABULAR, "--data", str(path), "--output", str(results)]) == 2, name
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and said in err, (name, err)
    path = tmp_path / "not.npz"
    path.write_text("not an archive")
    assert main(["--model", TABULAR, "--data", str(path), "--output", str(results)]) == 2
    assert "not a readable .npz" in capsys.readouterr().err


@pytest.mark.parametrize("strategy", ["multi-tower", "mirrored"])
def test_two_towers_of_the_keras_example_step_as_one_single_step_of_the_whole_batch(strategy, clicks):
    changes = dict(model=WIDE_DEEP, data=clicks, batch_size=B)
    towers = train_in_process(config_for(strategy, workers=2, **changes), steps=1)
    single = train_in_process(config_for("single", **{**changes, "batch_size": 2 * B}), steps=1)
    assert_weights_close(towers, single)
    start = initial_weights(config_for("single", **changes))
    trained = [i for i, (w, w0) in enumerate(zip(single, start, strict=True)) if np.abs(w - w0).max() > 0]
    assert len(trained) == len(start) - 1  # all but the wide part's fixed sum


@pytest.mark.slow
@pytest.mark.parametrize("strategy, extra", RANKS)
def test_two_ranks_of_the_keras_example_step_as_one_single_step_of_the_whole_batch(clicks, strategy, extra,
                                                                                    background):
    run_dir = background.result(("keras ranks", strategy))
    single = train_in_process(config_for("single", model=WIDE_DEEP, data=clicks, batch_size=2 * B), steps=1)
    assert_weights_close(load_weights(run_dir / "weights.npz"), single)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["model"]["name"] == "wide_deep" and record["model"]["table_bytes"] == 20_000 * 17 * 4
    assert record["exchange"]["sparse_exchange"]


@pytest.mark.slow
def test_the_protocol_example_steps_under_ps_sync_as_one_single_step_of_the_whole_batch(tabular, background):
    run_dir = background.result("protocol ps-sync")
    single = train_in_process(config_for("single", model=TABULAR, data=tabular, batch_size=2 * B), steps=1)
    assert_weights_close(load_weights(run_dir / "weights.npz"), single)
    assert Path(json.loads((run_dir / "run.json").read_text())["config"]["data"]).name == "tabular.npz"


def test_the_guide_says_which_strategies_run_which_kind_of_model():
    guide = (ROOT / "docs" / "your-model.md").read_text()
    rows = dict(re.findall(r"^\| `([\w-]+)` \| yes \| (yes|no) \|", guide, re.M))
    assert rows == {name: "no" if cls.v1_graph else "yes" for name, cls in registry.all_strategies().items()}


def test_a_preset_leaves_out_the_cells_a_run_would_refuse_and_says_why():
    from bench.drivers.presets.matrix import plan
    from bench.drivers.presets.runner import refused_cells

    runs = plan(["single", "ps-sync", "allreduce"], ["mlp", WIDE_DEEP], [2], 10, 0, 1)
    assert {(run.strategy, run.model) for run in runs} == {
        ("single", "mlp"), ("ps-sync", "mlp"), ("allreduce", "mlp"), ("single", WIDE_DEEP), ("allreduce", WIDE_DEEP)}
    [line] = refused_cells((s, m) for m in ["mlp", WIDE_DEEP] for s in ["single", "ps-sync", "allreduce"])
    assert line.startswith("ps-sync x wide_deep: a Keras 3 model cannot be built")


def test_the_projection_analyses_the_keras_encoder_example():
    from bench.run import models
    from bench.run.models import tensors

    analysed = tensors.of(ENCODER)
    assert analysed.model == "keras_encoder" and analysed.forward_gflops > 0
    assert sum(t.nbytes for t in analysed.tensors) == 4 * models.build(ENCODER, 0).num_params
    assert max(t.ready for t in analysed.tensors) == pytest.approx(1.0)


def test_the_projection_analyses_a_users_model_as_a_registered_one():
    from bench.run.models import tensors

    analysed = tensors.of(TABULAR)
    assert analysed.model == "tabular_net.TabularNet" and len(analysed.tensors) == 12
    assert analysed.forward_gflops > 0 and analysed.tensors[0].name == "w_in"
    # the first layer's weights are read first, so their gradient is ready last; the output layer's first
    assert analysed.tensors[0].ready == pytest.approx(1.0) and analysed.tensors[-1].ready < 0.1
