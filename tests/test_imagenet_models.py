"""The ImageNet models are the published architectures: their parameter counts are Keras'
applications' (built with weights=None), whatever --image-size a CPU run uses, and one short
run of each ends ok under `single` and under one strategy of each family."""

from __future__ import annotations

import numpy as np
import pytest

from bench.run import models
from tests.imagenet_runs import SAME_CODE_AS, STRATEGIES, cases, short_run
from tests.processes import bench, run_record

# Keras applications, weights=None, with the 1000-class top: (all weights, trainable ones)
KERAS = {"resnet50": (25_636_712, 25_583_592), "resnet101": (44_707_176, 44_601_832),
         "resnet152": (60_419_944, 60_268_520), "inception3": (23_851_784, 23_817_352),
         "vgg16": (138_357_544, 138_357_544)}
KERAS_BUILDERS = {"resnet50": "ResNet50", "resnet101": "ResNet101", "resnet152": "ResNet152",
                  "inception3": "InceptionV3", "vgg16": "VGG16"}


def counts(model) -> tuple[int, int]:
    return sum(int(np.prod(v.shape)) for v in model.weights), model.num_params


@pytest.mark.parametrize("name", models.IMAGENET)
def test_parameters_are_the_published_architectures_at_any_input_size(name):
    small = models.build(name, 0, image_size=models.MIN_IMAGE_SIZE[name])
    assert counts(small) == KERAS[name]
    assert small.input_shape[:2] == (models.MIN_IMAGE_SIZE[name],) * 2
    assert small.gradient_bytes == 4 * KERAS[name][1]


@pytest.mark.slow
@pytest.mark.parametrize("name", models.IMAGENET)
def test_keras_builds_the_same_counts(name):
    import keras

    built = getattr(keras.applications, KERAS_BUILDERS[name])(weights=None)
    trainable = sum(int(np.prod(w.shape)) for w in built.trainable_weights)
    assert (built.count_params(), trainable) == KERAS[name]


def test_the_full_size_forward_pass_gives_one_logit_per_class():
    import tensorflow as tf

    model = models.build("resnet50", 0)
    assert model.input_shape == (224, 224, 3)
    assert model.logits(tf.zeros((1, 224, 224, 3)), training=False).shape == (1, 1000)


@pytest.mark.parametrize("argv, message", [
    (["--model", "mlp", "--image-size", "64"], "--image-size: only for the ImageNet models"),
    (["--model", "inception3", "--image-size", "64"], "--image-size: inception3 needs at least 75"),
])
def test_a_bad_image_size_is_refused_in_one_line(argv, message, results):
    done = bench(*argv, "--output", str(results))
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not any(results.iterdir())


def test_the_short_runs_cover_every_model_in_every_family_or_its_code_in_each():
    ran = set(cases())
    for name in models.IMAGENET:
        for strategy in STRATEGIES:
            assert (name, strategy) in ran or (SAME_CODE_AS[name], strategy) in ran
    assert {name for name, strategy in ran if strategy == "single"} == set(models.IMAGENET)


def background_jobs(item) -> dict:
    """The short runs, made in the background (tests/background.py, tests/imagenet_runs.py)."""
    if item.originalname != "test_one_short_run_of_each_model_ends_ok_in_each_family":
        return {}
    name, strategy = item.callspec.params["name"], item.callspec.params["strategy"]
    return {("imagenet", name, strategy): short_run(name, strategy)}


@pytest.mark.slow
@pytest.mark.parametrize("name, strategy", cases())
def test_one_short_run_of_each_model_ends_ok_in_each_family(name, strategy, background):
    done, results = background.result(("imagenet", name, strategy))
    assert done.returncode == 0, done.stderr[-2000:]
    record = run_record(results)
    assert record["status"] == "ok"
    assert record["model"]["num_params"] == KERAS[name][1]
