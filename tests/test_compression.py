import numpy as np
import pytest
import tensorflow as tf

from strategies._compression import parse
from strategies.workers.compression import Compressor
from tests.equivalence import assert_weights_close, batches_of, config_for, initial_weights, load_weights
from tests.processes import bench
from tests.test_allreduce import run_dir

B = 16


@pytest.mark.parametrize("text, parsed", [("none", ("none", None)), ("fp16", ("fp16", None)),
                                          ("topk:0.01", ("topk", 0.01)), ("topk:1", ("topk", 1.0))])
def test_settings_parse(text, parsed):
    assert parse(text) == parsed


@pytest.mark.parametrize("text", ["topk", "topk:0", "topk:1.5", "topk:x", "fp32", "gzip"])
def test_bad_settings_are_refused(text):
    with pytest.raises(ValueError):
        parse(text)


def test_top_k_sends_the_largest_entries_and_keeps_the_rest_for_later():
    var = tf.Variable(np.zeros((4, 5), np.float32))
    compressor = Compressor("topk:0.2", [var])  # 4 of 20 entries a step
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(6)]
    sent_total = np.zeros((4, 5), np.float32)
    for grad in grads:
        residual_before = compressor.residuals[id(var)].numpy()
        wire = compressor.encode(tf.constant(grad), var)
        sent = compressor.decode(wire, var).numpy()
        owed = (grad + residual_before).ravel()
        assert len(wire.values) == 4
        # the 4 sent are the 4 largest in magnitude of the gradient plus what was owed
        assert sorted(np.abs(wire.values.numpy())) == pytest.approx(sorted(np.abs(owed))[-4:])
        sent_total += sent
    # error feedback: nothing is lost, what was not sent yet is the residual
    np.testing.assert_allclose(sent_total + compressor.residuals[id(var)].numpy(), sum(grads), rtol=1e-5, atol=1e-5)


def test_fp16_is_half_the_bytes_and_comes_back_float32():
    var = tf.Variable(np.zeros(10, np.float32))
    compressor = Compressor("fp16", [var])
    grad = tf.constant(np.linspace(-1, 1, 10).astype(np.float32))
    wire = compressor.encode(grad, var)
    assert wire.tensor.dtype == tf.float16
    back = compressor.decode(wire, var)
    assert back.dtype == tf.float32
    np.testing.assert_allclose(back.numpy(), grad.numpy(), atol=1e-3)


def expected_topk_step(ratio: float) -> list[np.ndarray]:
    """One SGD step from the seeded weights with the mean of each of 2 workers' top-k gradients
    (nothing owed yet), each worker on its first unshuffled batch of B."""
    from bench.run import models

    config = config_for("single", batch_size=B)
    model = models.for_run(config)
    total = None
    for worker in (0, 1):
        compressor = Compressor(f"topk:{ratio}", model.trainables)  # each worker's own residuals
        x, y = batches_of(config, [(worker, 0)], 2)
        with tf.GradientTape() as tape:
            loss = model.loss(tf.constant(x), tf.constant(y))
        grads = tape.gradient(loss, model.trainables)
        sent = [compressor.decode(compressor.encode(g, v), v).numpy() for g, v in zip(grads, model.trainables)]
        total = sent if total is None else [a + b for a, b in zip(total, sent, strict=True)]
    weights = initial_weights(config)
    return [w - config.lr * t / 2 for w, t in zip(weights, total, strict=True)]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["allreduce", "ps-sync"])
def test_a_top_k_step_applies_the_mean_of_each_workers_top_k(results, strategy):
    done = bench("--strategy", strategy, "--workers", "2", "--compression", "topk:0.1", "--batch-size", str(B),
                 "--steps", "1", "--warmup-steps", "0", "--no-shuffle", "--lr", "0.1", "--save-weights",
                 "--output", str(results))
    assert done.returncode == 0, done.stderr[-3000:]
    assert_weights_close(load_weights(run_dir(results) / "weights.npz"), expected_topk_step(0.1))
