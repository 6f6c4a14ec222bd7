"""The embedding's sparse exchange in real multi-process runs: every strategy's step over two
workers equals one single-process step of the combined batch, and the records say what moved."""

import numpy as np
import pytest

from tests.background import run_to_end
from tests.conftest import only_run
from tests.equivalence import assert_weights_close, config_for, initial_weights, load_weights, train_in_process
from tests.processes import run_record

pytestmark = pytest.mark.slow
B = 16
ROWS = 3000  # small enough that many rows are touched by one worker's batch only
ONE_STEP = ("--model", "embedding", "--embedding-rows", str(ROWS), "--workers", "2", "--batch-size", str(B),
            "--steps", "1", "--warmup-steps", "0", "--no-shuffle", "--lr", "0.5", "--save-weights")
# each test's one-step runs, made in the background (tests/background.py): only their weights and
# records are checked
RUNS = {
    "one-ps": ("--strategy", "ps-sync", "--ps", "1"),
    "table-split-over-two-ps": ("--strategy", "ps-sync", "--ps", "2", "--ps-partition-mb", "0.1"),
    "allreduce sparse": ("--strategy", "allreduce"),
    "allreduce dense": ("--strategy", "allreduce", "--sparse-as-dense", "true"),
    "allreduce-tf": ("--strategy", "allreduce-tf"),
}


def runs_of(item) -> list[str]:
    if item.originalname == "test_ps_sync_sparse_step_equals_one_single_step_of_the_whole_batch":
        return [item.callspec.params["key"]]
    return {"test_horovod_allgather_and_sparse_as_dense_give_the_same_weights": ["allreduce sparse", "allreduce dense"],
            "test_allreduce_tf_embedding_step_equals_one_single_step": ["allreduce-tf"]}.get(item.originalname, [])


def background_jobs(item) -> dict:
    return {("embedding", key): run_to_end(*RUNS[key], *ONE_STEP) for key in runs_of(item)}


def one_step(background, key: str) -> tuple[list[np.ndarray], dict]:
    results = background.result(("embedding", key))
    return load_weights(only_run(results) / "weights.npz"), run_record(results)


def single_step_of_both_batches() -> list[np.ndarray]:
    return train_in_process(config_for("single", model="embedding", data="synthetic-ids", embedding_rows=ROWS,
                                       batch_size=2 * B, lr=0.5), steps=1)


def rows_touched_by_one_worker_only(weights: list[np.ndarray]) -> int:
    start = initial_weights(config_for("single", model="embedding", data="synthetic-ids", embedding_rows=ROWS))
    return int((np.abs(weights[0] - start[0]).max(axis=1) > 0).sum())


@pytest.mark.parametrize("key", ["one-ps", "table-split-over-two-ps"])
def test_ps_sync_sparse_step_equals_one_single_step_of_the_whole_batch(background, key):
    weights, record = one_step(background, key)
    assert_weights_close(weights, single_step_of_both_batches())
    assert rows_touched_by_one_worker_only(weights) > 0
    if key == "table-split-over-two-ps":  # the table is split over both ps tasks
        tasks = record["strategy_info"]["variable_ps_task"]
        assert {tasks["embedding/part_0"], tasks["embedding/part_1"]} == {0, 1}
    assert record["exchange"]["worker_sent_per_step"] < 0.1 * record["model"]["table_bytes"]


def test_horovod_allgather_and_sparse_as_dense_give_the_same_weights(background):
    sparse, sparse_record = one_step(background, "allreduce sparse")
    dense, dense_record = one_step(background, "allreduce dense")
    assert_weights_close(sparse, dense)
    assert_weights_close(sparse, single_step_of_both_batches())
    assert sparse_record["strategy"]["variant"] == "allreduce" and dense_record["strategy"]["variant"] == \
        "allreduce (dense)"
    # the dense allreduce moves the whole table; the allgather the touched rows
    assert dense_record["exchange"]["worker_sent_per_step"] > 10 * sparse_record["exchange"]["worker_sent_per_step"]


def test_allreduce_tf_embedding_step_equals_one_single_step(background):
    weights, record = one_step(background, "allreduce-tf")
    assert_weights_close(weights, single_step_of_both_batches())
    assert "all-gather" in record["exchange"]["sparse_exchange"]
