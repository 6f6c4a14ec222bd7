"""Bad input is one line and exit status 2 before any work starts, and nothing is written."""

import pickle

import numpy as np
import pytest

from bench.cli import config_from_args, main
from bench.run.data.cifar10 import TEST_BATCH, TRAIN_BATCHES


def one_line_exit_2(argv, capsys, results) -> str:
    assert main([*argv, "--output", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert list(results.iterdir()) == []  # no run folder, nothing started
    return err


def test_a_strategy_refuses_worker_counts_it_does_not_support(capsys, results):
    err = one_line_exit_2(["--strategy", "single", "--workers", "4"], capsys, results)
    assert "--workers 4: single runs with exactly 1 worker(s)" in err


@pytest.mark.parametrize("argv, flag, takers", [
    (["--strategy", "allreduce", "--replicas-to-aggregate", "2"], "--replicas-to-aggregate", "ps-sync"),
    (["--strategy", "ps-sync", "--hvd-fusion-threshold-mb", "8"], "--hvd-fusion-threshold-mb", "allreduce, local-sgd"),
    (["--strategy", "allreduce-tf", "--compression", "fp16"], "--compression",
     "allreduce, local-sgd, local-sgd-ps, ps-async, ps-sync"),
    (["--strategy", "single", "--ps-placement", "balanced"], "--ps-placement", "local-sgd-ps, ps-async, ps-sync"),
])
def test_a_flag_of_another_strategy_is_refused(argv, flag, takers, capsys, results):
    err = one_line_exit_2(argv, capsys, results)
    assert f"{flag} is an option of {takers}; --strategy {argv[1]} does not take it" in err


def test_an_option_of_the_chosen_strategy_is_kept_and_defaults_fill_the_rest():
    config = config_from_args(["--strategy", "ps-sync", "--workers", "3", "--replicas-to-aggregate", "2"])
    assert config.options["replicas_to_aggregate"] == 2 and config.options["ps_placement"] == "round-robin"


def test_an_unset_warmup_adapts_to_short_runs_and_an_explicit_one_is_checked(capsys, results):
    assert config_from_args(["--steps", "5"]).warmup_steps == 1
    assert config_from_args(["--steps", "300"]).warmup_steps == 10
    assert config_from_args(["--steps", "5", "--warmup-steps", "0"]).warmup_steps == 0
    one_line_exit_2(["--steps", "5", "--warmup-steps", "10"], capsys, results)


@pytest.mark.parametrize("output", ["/proc/distbench-nope", "FILE/sub"])
def test_an_output_folder_that_cannot_be_written_is_refused(output, capsys, tmp_path):
    blocker = tmp_path / "FILE"
    blocker.write_text("a file, not a folder")
    output = output.replace("FILE", str(blocker))
    assert main(["--steps", "5", "--output", output]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--output {output}: cannot write there" in err


def write_cifar(folder, make_batch):
    folder.mkdir(parents=True, exist_ok=True)
    for name in [*TRAIN_BATCHES, TEST_BATCH]:
        (folder / name).write_bytes(make_batch(name))


def real_batch(_name: str) -> bytes:
    rng = np.random.default_rng(0)
    return pickle.dumps({b"data": rng.integers(0, 256, (10, 3072), dtype=np.uint8),
                         b"labels": list(rng.integers(0, 10, 10)), b"batch_label": b"x"})


def test_corrupt_mnist_npz_is_one_line_naming_the_file(capsys, results, tmp_path):
    (tmp_path / "mnist.npz").write_bytes(np.random.default_rng(0).bytes(4096))
    err = one_line_exit_2(["--data", "mnist", "--data-dir", str(tmp_path)], capsys, results)
    assert f"{tmp_path / 'mnist.npz'}: not a readable .npz" in err


def test_mnist_npz_with_bad_labels_is_refused(capsys, results, tmp_path):
    x = np.zeros((4, 28, 28), np.uint8)
    np.savez(tmp_path / "mnist.npz", x_train=x, y_train=np.array([0, 1, 2, 11]), x_test=x, y_test=np.zeros(4, int))
    err = one_line_exit_2(["--data", "mnist", "--data-dir", str(tmp_path)], capsys, results)
    assert "y_train has labels outside 0..9" in err


def test_truncated_idx_file_is_refused(capsys, results, tmp_path):
    import struct

    for stem, dims in (("train-images-idx3-ubyte", (5, 28, 28)), ("train-labels-idx1-ubyte", (5,)),
                       ("t10k-images-idx3-ubyte", (5, 28, 28)), ("t10k-labels-idx1-ubyte", (5,))):
        header = struct.pack(">HBB", 0, 8, len(dims)) + struct.pack(">" + "I" * len(dims), *dims)
        (tmp_path / stem).write_bytes(header + bytes(int(np.prod(dims)) - (1 if "t10k-images" in stem else 0)))
    err = one_line_exit_2(["--data", "mnist", "--data-dir", str(tmp_path)], capsys, results)
    assert "t10k-images-idx3-ubyte: header says" in err


def test_junk_cifar_batches_are_one_line_naming_the_file(capsys, results, tmp_path):
    write_cifar(tmp_path, lambda name: real_batch(name) if name != "data_batch_3" else b"\x80\x04junk" * 50)
    err = one_line_exit_2(["--data", "cifar10", "--data-dir", str(tmp_path)], capsys, results)
    assert f"{tmp_path / 'data_batch_3'}: not a CIFAR-10 batch" in err


def test_cifar_labels_out_of_range_are_refused(capsys, results, tmp_path):
    def batch(name):
        return pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]})

    write_cifar(tmp_path, batch)
    assert "labels outside 0..9" in one_line_exit_2(["--data", "cifar10", "--data-dir", str(tmp_path)],
                                                    capsys, results)


class RunsACommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_cifar_pickle_runs_no_code(capsys, results, tmp_path):
    marker = tmp_path / "pwned"
    crafted = pickle.dumps({b"data": RunsACommand(marker), b"labels": [0]})
    assert pickle.loads(crafted) == {b"data": 0, b"labels": [0]} and marker.exists()  # plain pickle runs it
    marker.unlink()
    write_cifar(tmp_path / "c", lambda name: crafted)
    err = one_line_exit_2(["--data", "cifar10", "--data-dir", str(tmp_path / "c")], capsys, results)
    assert "refused to load posix.system" in err and not marker.exists()


def test_real_cifar_batches_still_load(tmp_path):
    from bench.run import data

    write_cifar(tmp_path, real_batch)
    dataset = data.load("cifar10", (32, 32, 3), 4, 0, str(tmp_path))
    assert dataset.train.x.shape == (50, 32, 32, 3) and dataset.val.y.dtype == np.int32


def test_the_default_comparison_gives_each_run_only_its_own_strategy_flags():
    from bench.drivers.presets.matrix import own_flags, worker_counts

    extra = ["--hvd-fusion-threshold-mb", "8", "--replicas-to-aggregate=2", "--lr", "0.05"]
    assert own_flags("allreduce", extra) == ["--hvd-fusion-threshold-mb", "8", "--lr", "0.05"]
    assert own_flags("ps-sync", extra) == ["--replicas-to-aggregate=2", "--lr", "0.05"]
    assert worker_counts("single", [1, 2, 4]) == [1] and worker_counts("single", [2, 4]) == [1]
    assert worker_counts("ps-async", [1, 2, 4]) == [1, 2, 4]
