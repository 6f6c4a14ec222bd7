from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from bench.run import models
from bench.run.data import IMAGES
from bench.run.models.base import initial_values

# the embedding: test_embedding.py. The ImageNet models: test_imagenet_models.py, whose short runs
# train each in a tf.function (single) and in a v1 graph (ps-sync)
IMAGE_MODELS = sorted(m for m in models.MODELS if models.READS[m] == IMAGES and m not in models.IMAGENET)

EXPECTED_PARAMS = {
    "mlp": 784 * 100 + 100 + 100 * 10 + 10,
    "cnn": (5 * 5 * 32 + 32) + (5 * 5 * 32 * 64 + 64) + (7 * 7 * 64 * 256 + 256) + (256 * 10 + 10),
}


@pytest.mark.parametrize("name", IMAGE_MODELS)
def test_forward_backward_in_tf_function(name):
    model = models.build(name, seed=0)
    x = tf.random.uniform((3, *model.input_shape))
    y = tf.constant([0, 1, 2])

    @tf.function
    def grads():
        with tf.GradientTape() as tape:
            loss = model.loss(x, y)
        return loss, tape.gradient(loss, model.trainables)

    loss, g = grads()
    assert model.logits(x, training=False).shape == (3, model.num_classes)
    assert np.isfinite(loss.numpy())
    assert [gi.shape for gi in g] == [v.shape for v in model.trainables]
    assert model.gradient_bytes == 4 * model.num_params
    if name in EXPECTED_PARAMS:
        assert model.num_params == EXPECTED_PARAMS[name]


def test_resnet20_has_the_published_size():
    # He et al. (2016) give 0.27M parameters for ResNet-20 on CIFAR-10.
    assert 0.26e6 < models.build("resnet20", 0).num_params < 0.28e6


@pytest.mark.parametrize("name", IMAGE_MODELS)
def test_runs_in_a_v1_graph(name):
    graph = tf.Graph()
    with graph.as_default():
        model = models.build(name, seed=0)
        x = tf.compat.v1.placeholder(tf.float32, (None, *model.input_shape))
        y = tf.compat.v1.placeholder(tf.int32, (None,))
        loss = model.loss(x, y)
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
            train = opt.minimize(loss, var_list=model.trainables)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer(), initial_values())
            feed = {x: np.random.rand(2, *model.input_shape), y: [3, 4]}
            before = sess.run(loss, feed)
            sess.run(train, feed)
            assert np.isfinite(before) and sess.run(loss, feed) != before


def test_same_seed_same_weights_in_both_modes():
    eager = [v.numpy() for v in models.build("cnn", 7).weights]
    with tf.Graph().as_default():
        model = models.build("cnn", 7)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer(), initial_values())
            graph = sess.run(model.weights)
    assert all(np.array_equal(a, b) for a, b in zip(eager, graph, strict=True))


@pytest.mark.parametrize("partition", [None, (2, 1024)], ids=["whole", "split-over-two-ps"])
def test_a_v1_graph_holds_no_constant_of_a_weights_size(partition):
    # a distributed session ships the graph to every ps task: the initial values are fed instead
    with tf.Graph().as_default() as graph:
        model = models.get("cnn")(7, partition=partition)
        consts = [int(np.prod(op.outputs[0].shape)) for op in graph.get_operations() if op.type == "Const"]
        fed = initial_values()
        assert max(consts, default=0) < max(value.size for value in fed.values())
        assert sum(value.size for value in fed.values()) == model.num_params


@pytest.mark.parametrize("name", [*IMAGE_MODELS, "embedding"])
def test_the_suites_models_step_the_same_without_autograph(name):
    # their steps are traced without AutoGraph (Model.autograph): no control flow on tensors to convert
    from bench.run.models.base import Model

    model = models.build(name, seed=0, **({"rows": 50, "width": 4} if name == "embedding" else {}))
    assert not model.autograph and Model.autograph  # a user's own Model subclass keeps it
    high = model.input_high or 50
    shape = (3, *(d or 5 for d in model.input_shape))
    x = tf.random.uniform(shape, maxval=high, dtype=tf.int32) if model.input_dtype == tf.int32 \
        else tf.random.uniform(shape)
    y = tf.constant([0, 1, 0])

    def step():
        with tf.GradientTape() as tape:
            loss = model.loss(x, y)
        return loss, tape.gradient(loss, model.trainables)

    plain, converted = (tf.function(step, autograph=flag)() for flag in (False, True))
    np.testing.assert_array_equal(plain[0].numpy(), converted[0].numpy())
    for a, b in zip(plain[1], converted[1], strict=True):
        np.testing.assert_array_equal(tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy())


def test_a_model_is_one_file_found_by_listing_as_the_guide_shows(tmp_path):
    # docs/adding-a-model.md's example, copied as it is into a copy of the suite, trains; the names
    # are known without importing TensorFlow
    import re
    import subprocess
    import sys

    from tests.conftest import ROOT
    from tests.test_new_strategy import suite_with

    guide = (ROOT / "docs" / "adding-a-model.md").read_text()
    block = r"^`(bench/run/models/[\w]+\.py)`[^\n]*:\n\n```python\n(.*?)```"
    path, text = re.search(block, guide, re.M | re.S).groups()
    bench = suite_with(tmp_path, {path: text})
    done = bench("--strategy", "single", "--model", "mlp-wide", "--data", "digits", "--steps", "5", "--warmup-steps",
                 "1", "--output", str(tmp_path / "results"))
    assert done.returncode == 0, done.stderr[-2000:]
    probe = ("import sys; from bench.run import models; "
             "print(models.READS['mlp-wide'], 'tensorflow' in sys.modules)")
    listed = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path / "suite", capture_output=True, text=True,
                            env={"PYTHONPATH": str(tmp_path / "suite"), "PATH": ""})
    assert listed.stdout.split() == ["images", "False"], listed.stderr[-2000:]


def test_a_malformed_declaration_is_skipped_with_a_warning(tmp_path):
    from bench.run.models import catalog

    bad = tmp_path / "bad.py"
    bad.write_text('DECLARES = ({"name": "x", "class": "X", "reads": "pixels"},)\n')
    with pytest.raises(ValueError, match="reads must be"):
        catalog.read(bad, "bad")
    bad.write_text('DECLARES = ({"name": "x", "class": "X"},)\n')
    with pytest.raises(ValueError, match="lacks reads"):
        catalog.read(bad, "bad")
    assert catalog.read(Path(catalog.__file__).parent / "base.py", "base") == []  # a helper declares nothing
