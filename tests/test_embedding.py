"""The sparse workload: synthetic-ids and Criteo data, the embedding model's sparse gradient,
its bytes, the in-process strategies' equivalence on it, and its bad flags."""

import numpy as np
import pytest
import tensorflow as tf

from bench.config import RunConfig
from bench.metrics import Gradient, ps_worker_bytes, sparse_allreduce_bytes
from bench.run import models
from bench.run.data import ids
from bench.run.process.inputs import load_data, rows_touched
from bench.run.process.lifecycle import exchange_facts, model_facts
from tests.equivalence import assert_weights_close, config_for, initial_weights, train_in_process
from tests.test_hostile_input import one_line_exit_2

SMALL = dict(model="embedding", data="synthetic-ids", embedding_rows=3000, batch_size=16)


def test_synthetic_ids_are_fixed_by_the_seed_and_follow_the_zipf_law():
    a = ids.synthetic(50000, 4, 1.05, seed=3, train=20000, val=1000)
    b = ids.synthetic(50000, 4, 1.05, seed=3, train=20000, val=1000)
    c = ids.synthetic(50000, 4, 1.05, seed=4, train=20000, val=1000)
    assert np.array_equal(a.train.x, b.train.x) and np.array_equal(a.val.y, b.val.y)
    assert not np.array_equal(a.train.x, c.train.x)
    assert a.train.x.dtype == np.int32 and a.train.x.min() >= 0 and a.train.x.max() < 50000
    assert 0.35 < a.train.y.mean() < 0.65  # clicks are neither rare nor certain
    # the rank-frequency slope of one feature's ids is the exponent
    counts = np.sort(np.bincount(a.train.x[:, 0], minlength=50000))[::-1]
    ranks = np.arange(1, 101)
    slope = np.polyfit(np.log(ranks), np.log(counts[:100]), 1)[0]
    assert -1.25 < slope < -0.85
    # the features' hot rows differ
    assert np.bincount(a.train.x[:, 0]).argmax() != np.bincount(a.train.x[:, 1]).argmax()


def test_a_steeper_exponent_makes_fewer_rows_hot():
    flat = ids.synthetic(50000, 4, 0.8, seed=0, train=8192, val=64)
    steep = ids.synthetic(50000, 4, 1.6, seed=0, train=8192, val=64)
    assert len(np.unique(steep.train.x)) < 0.5 * len(np.unique(flat.train.x))


def write_criteo(path, lines: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(lines):
        integers = [str(rng.integers(0, 1000)) if rng.random() > 0.2 else "" for _ in range(13)]
        categories = [f"{rng.integers(0, 50):08x}" if rng.random() > 0.1 else "" for _ in range(26)]
        rows.append("\t".join([str(rng.integers(0, 2)), *integers, *categories]))
    path.write_text("\n".join(rows) + "\n")


def test_criteo_tsv_is_hashed_into_the_table(tmp_path):
    write_criteo(tmp_path / "train.txt", 500)
    data = ids.criteo(str(tmp_path), rows=1000)
    assert data.train.x.shape[1] == ids.CRITEO_FEATURES and len(data.train) + len(data.val) == 500
    assert data.train.x.min() >= 0 and data.train.x.max() < 1000
    assert set(np.unique(data.train.y)) <= {0, 1}
    again = ids.criteo(str(tmp_path), rows=1000)
    assert np.array_equal(data.train.x, again.train.x)  # the hash is stable across processes
    # the same category in two features lands on two rows
    same = "\t".join(["1", *["5"] * 13, *["deadbeef"] * 26])
    (tmp_path / "train.txt").write_text(same + "\n" + same + "\n")
    one = ids.criteo(str(tmp_path), rows=10**6).train.x[0]
    assert len(set(one[13:].tolist())) == 26 and len(set(one[:13].tolist())) == 13


def test_criteo_in_the_wrong_layout_is_one_line(tmp_path, capsys, results):
    (tmp_path / "train.txt").write_text("1\t2\t3\n0\t4\t5\n")
    err = one_line_exit_2(["--model", "embedding", "--data", "criteo", "--data-dir", str(tmp_path)], capsys, results)
    assert "has 3 columns" in err


@pytest.mark.parametrize("argv, expected", [
    (["--embedding-width", "0"], "--embedding-width: must be >= 1"),
    (["--zipf-exponent", "0"], "--zipf-exponent: must be > 0"),
    (["--zipf-exponent", "-1"], "--zipf-exponent: must be > 0"),
    (["--embedding-rows", str(1 << 40)], "needs"),
    (["--data", "digits"], "this model reads ids"),
])
def test_bad_embedding_flags_are_one_line(argv, expected, capsys, results):
    err = one_line_exit_2(["--model", "embedding", *argv], capsys, results)
    assert expected in err


def test_a_table_flag_with_an_image_model_is_refused(capsys, results):
    err = one_line_exit_2(["--model", "cnn", "--embedding-rows", "1000"], capsys, results)
    assert "--embedding-rows: only for --model embedding, not cnn" in err


def test_an_image_model_refuses_ids():
    from bench.cli import config_from_args
    from bench.errors import UsageError

    with pytest.raises(UsageError, match="reads images"):
        config_from_args(["--model", "cnn", "--data", "synthetic-ids"])
    assert config_from_args(["--model", "embedding"]).data == "synthetic-ids"
    assert config_from_args(["--model", "embedding"]).target_accuracy == 0.7
    typed = config_from_args(["--model", "embedding", "--embedding-rows", "5000", "--zipf-exponent", "1.3"])
    assert (typed.embedding_rows, typed.zipf_exponent, typed.embedding_width) == (5000, 1.3, 32)


def test_the_table_gradient_is_sparse_over_the_batch_rows():
    model = models.build("embedding", 0, rows=500, width=8)
    x = tf.constant([[3, 7, 3], [7, 9, 400]], dtype=tf.int32)
    with tf.GradientTape() as tape:
        loss = model.loss(x, tf.constant([0, 1]))
    grads = tape.gradient(loss, model.trainables)
    table = grads[0]
    assert isinstance(table, tf.IndexedSlices)
    assert sorted(table.indices.numpy().tolist()) == [3, 7, 9, 400]  # each touched row once
    assert all(isinstance(g, tf.Tensor) for g in grads[1:])


def test_a_mirrored_replica_reads_only_the_rows_its_batch_touches():
    """tf.gather on a mirrored variable reads the whole table every step (TF 2.21: its sparse_read is the base
    Variable's, which raises, and tf.gather falls back to a dense read; mirrored ran embedding 5.8x slower than
    single at one replica for it, docs/embedding.md). The replica's step must read rows, not the table."""
    strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0"])
    with strategy.scope():
        model = models.build("embedding", 0, rows=5000, width=8)
    x = tf.constant([[3, 7, 3], [7, 9, 400]], dtype=tf.int32)

    @tf.function
    def step():
        def replica():
            with tf.GradientTape() as tape:
                loss = model.loss(x, tf.constant([0, 1]))
            return tape.gradient(loss, model.trainables)[0]
        return strategy.run(replica)

    graph = step.get_concrete_function().graph
    whole = [op.name for op in graph.get_operations() if op.type == "ReadVariableOp"
             and op.outputs[0].shape.as_list() == [5000, 8]]
    assert not whole, f"the whole table is read: {whole}"
    assert any(op.type == "ResourceGather" for op in graph.get_operations())
    assert isinstance(step(), tf.IndexedSlices)


def test_default_table_is_tens_of_mb_and_a_batch_touches_well_under_one_percent():
    config = config_for("single", model="embedding", data="synthetic-ids", batch_size=64)
    data = load_data(config, config.batch_size)
    touched = rows_touched(config, data, 0, 1)
    # the count is of the batches the feed gives: check one against the plan by hand
    assert 0 < touched < 0.01 * config.embedding_rows
    facts = model_facts(models.for_run(config), touched)
    assert 10 * 2**20 <= facts["table_bytes"] <= 100 * 2**20
    assert facts["sparse_bytes_per_step"] == touched * (4 * config.embedding_width + 4)
    assert facts["gradient_bytes_per_step"] == facts["table_bytes"] + facts["dense_bytes"]


def test_rows_touched_counts_the_batches_the_feed_gives():
    config = config_for("single", **{**SMALL, "batch_size": 8})
    data = load_data(config, config.batch_size)
    from bench.run.process.training import feed_for

    feed = feed_for(config, data, 0, 1)
    counted = [len(np.unique(feed.batch()[0].numpy())) for _ in range(5)]
    assert rows_touched(config, data, 0, 1, batches=5) == pytest.approx(np.mean(counted))


def test_each_exchange_moves_what_its_formula_says():
    gradient = Gradient(dense_bytes=1000, table_bytes=10**6, rows_touched=100, row_bytes=128)
    assert ps_worker_bytes(gradient) == (1000 + 100 * 132 + 400, 1000 + 100 * 128)
    assert sparse_allreduce_bytes(gradient, 4) == int(1.5 * 1000) + 3 * 100 * 132
    base = RunConfig(model="embedding", data="synthetic-ids", workers=4)
    model = {"gradient_bytes_per_step": 10**6 + 1000, "dense_bytes": 1000, "table_bytes": 10**6,
             "rows_touched_per_step": 100, "row_bytes": 128}
    from strategies import registry

    allreduce, ps_sync = registry.get("allreduce"), registry.get("ps-sync")
    sparse = exchange_facts(registry.with_defaults(base.replace(strategy="allreduce")), allreduce, model)
    dense = exchange_facts(registry.with_defaults(base.replace(strategy="allreduce", options={
        "sparse_as_dense": True})), allreduce, model)
    ps = exchange_facts(registry.with_defaults(base.replace(strategy="ps-sync")), ps_sync, model)
    assert sparse["worker_sent_per_step"] == 1500 + 3 * 13200
    assert dense["worker_sent_per_step"] == int(1.5 * (10**6 + 1000))
    assert ps["worker_sent_per_step"] == 1000 + 13200 + 400 and ps["ps_received_per_step"] == 14600
    assert "allgather" in sparse["sparse_exchange"] and "dense" in dense["sparse_exchange"]


@pytest.mark.parametrize("strategy", ["multi-tower", "mirrored"])
def test_two_towers_on_the_embedding_equal_one_step_of_the_whole_batch(strategy):
    towers = train_in_process(config_for(strategy, workers=2, **SMALL), steps=1)
    single = train_in_process(config_for("single", **{**SMALL, "batch_size": 32}), steps=1)
    assert_weights_close(towers, single)
    start = initial_weights(config_for("single", **SMALL))
    assert np.abs(towers[0] - start[0]).max() > 0
    # only the rows the batch touched moved
    moved_rows = (np.abs(towers[0] - start[0]).max(axis=1) > 0).sum()
    assert 0 < moved_rows <= 32 * 8


def test_the_presets_feed_the_embedding_its_ids_and_give_async_runs_as_many_steps_per_worker():
    from bench.drivers.presets import matrix, network

    planned = matrix.plan(["single", "ps-sync"], ["mlp", "embedding"], [1, 2], None, 0, 1)
    assert {(run.model, run.data) for run in planned} == {("mlp", "synthetic"), ("embedding", "synthetic-ids")}
    assert matrix.DEFAULT_MODELS[-1] == "embedding"
    runs = network.plan(4, [100.0], ["cnn", "embedding"], 40, 64)
    labels = [label for _, label, _ in runs]
    assert "100 Mbit/s embedding allreduce-dense" in labels and "100 Mbit/s cnn allreduce-dense" not in labels
    steps = {label: args[args.index("--steps") + 1] for _, label, args in runs}
    assert steps["100 Mbit/s cnn ps-async"] == "160" and steps["100 Mbit/s cnn ps-sync-1ps"] == "40"
    data = {label: args[args.index("--data") + 1] for _, label, args in runs}
    assert data["100 Mbit/s embedding ps-async"] == "synthetic-ids" and data["100 Mbit/s cnn ps-async"] == "synthetic"
