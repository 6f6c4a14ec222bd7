import gzip
import pickle
import struct

import numpy as np
import pytest

from bench.errors import UsageError
from bench.run import data
from bench.run.data import teacher


def write_idx(path, array, gz=False):
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(">" + "I" * array.ndim, *array.shape)
    payload = header + array.astype(np.uint8).tobytes()
    (gzip.open if gz else open)(path, "wb").write(payload)


def fake_mnist(rng, n):
    return rng.integers(0, 256, (n, 28, 28)).astype(np.uint8), rng.integers(0, 10, n).astype(np.uint8)


def test_mnist_npz(tmp_path):
    rng = np.random.default_rng(0)
    xtr, ytr = fake_mnist(rng, 20)
    xte, yte = fake_mnist(rng, 5)
    np.savez(tmp_path / "mnist.npz", x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
    ds = data.load("mnist", (28, 28, 1), 4, 0, str(tmp_path))
    assert ds.train.x.shape == (20, 28, 28, 1) and ds.val.x.shape == (5, 28, 28, 1)
    np.testing.assert_allclose(ds.train.x[..., 0], xtr / 255.0, rtol=1e-6)
    assert ds.train.y.tolist() == ytr.tolist()


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_idx_files(tmp_path, gz):
    rng = np.random.default_rng(1)
    xtr, ytr = fake_mnist(rng, 12)
    xte, yte = fake_mnist(rng, 3)
    suffix = ".gz" if gz else ""
    write_idx(tmp_path / f"train-images-idx3-ubyte{suffix}", xtr, gz)
    write_idx(tmp_path / f"train-labels-idx1-ubyte{suffix}", ytr, gz)
    write_idx(tmp_path / f"t10k-images-idx3-ubyte{suffix}", xte, gz)
    write_idx(tmp_path / f"t10k-labels-idx1-ubyte{suffix}", yte, gz)
    ds = data.load("mnist", (32, 32, 3), 4, 0, str(tmp_path))  # resized for resnet20
    assert ds.train.x.shape == (12, 32, 32, 3) and ds.val.y.tolist() == yte.tolist()


def test_mnist_missing_files_are_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="missing IDX"):
        data.check("mnist", str(tmp_path))


def test_cifar10_pickle_batches(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(2)
    for name in [*(f"data_batch_{i}" for i in range(1, 6)), "test_batch"]:
        batch = {b"data": rng.integers(0, 256, (4, 3072)).astype(np.uint8),
                 b"labels": rng.integers(0, 10, 4).tolist()}
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f)
    first = pickle.load(open(folder / "data_batch_1", "rb"), encoding="bytes")
    ds = data.load("cifar10", (32, 32, 3), 4, 0, str(tmp_path))
    assert ds.train.x.shape == (20, 32, 32, 3) and ds.val.x.shape == (4, 32, 32, 3)
    red_of_first = first[b"data"][0, :1024].reshape(32, 32) / 255.0
    np.testing.assert_allclose(ds.train.x[0, :, :, 0], red_of_first, rtol=1e-6)
    gray = data.load("cifar10", (28, 28, 1), 4, 0, str(tmp_path))
    assert gray.train.x.shape == (20, 28, 28, 1)


def test_digits_has_a_fixed_validation_split():
    a = data.load("digits", (28, 28, 1), 8, 0)
    b = data.load("digits", (28, 28, 1), 8, 99)
    assert len(a.train) + len(a.val) == 1797
    np.testing.assert_array_equal(a.val.y, b.val.y)
    assert 0.0 <= a.train.x.min() and a.train.x.max() <= 1.0


def test_digits_are_the_uci_images_as_scikit_learn_ships_them():
    from bench.run.data import digits

    raw = digits.load()
    images = np.concatenate([raw.train.x, raw.val.x])[..., 0] * 16
    labels = np.concatenate([raw.train.y, raw.val.y])
    assert images.shape == (1797, 8, 8)
    assert set(np.unique(images)) <= set(range(17))  # pixel counts of 4x4 blocks, 0..16
    # each digit's count in the file as scikit-learn ships it: another or a truncated file fails here
    assert np.bincount(labels).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


def test_shards_are_disjoint_and_cover_the_data():
    split = data.load("digits", (28, 28, 1), 8, 0).train
    shards = [split.shard(k, 3) for k in range(3)]
    assert sum(len(s) for s in shards) == len(split)
    np.testing.assert_array_equal(shards[1].y, split.y[1::3])


def test_synthetic_is_one_batch_made_from_the_seed():
    a = data.load("synthetic", (28, 28, 1), 16, 3)
    b = data.load("synthetic", (28, 28, 1), 16, 3)
    assert a.train.x.shape == (16, 28, 28, 1) and a.val is None
    np.testing.assert_array_equal(a.train.x, b.train.x)


def test_the_teacher_task_is_fixed_whatever_the_run_seed():
    a = data.load("teacher", (28, 28, 1), 8, 0, teacher_examples=500)
    b = data.load("teacher", (28, 28, 1), 8, 99, teacher_examples=500)
    assert a.train.x.shape == (500, 28, 28, 1) and len(a.val) == 100
    np.testing.assert_array_equal(a.train.x, b.train.x)
    np.testing.assert_array_equal(a.val.y, b.val.y)
    assert 0.0 <= a.train.x.min() and a.train.x.max() <= 1.0


def test_teacher_labels_use_every_class_and_depend_on_the_difficulty():
    easy = data.load("teacher", (28, 28, 1), 8, 0, teacher_factors=4, teacher_examples=5000)
    hard = data.load("teacher", (28, 28, 1), 8, 0, teacher_factors=16, teacher_examples=5000)
    shares = np.bincount(hard.train.y, minlength=10) / len(hard.train)
    assert shares.min() > 0.01 and shares.max() < 0.3  # no class is missing or dominates
    assert not np.array_equal(easy.train.y, hard.train.y)


def test_teacher_labels_are_not_a_linear_function_of_the_pixels():
    # the task must take work: a least-squares linear read-out of the pixels falls short of the target
    task = data.load("teacher", (8, 8, 1), 8, 0, teacher_examples=8000)
    x = np.c_[task.train.x.reshape(len(task.train), -1), np.ones(len(task.train))]
    fit, *_ = np.linalg.lstsq(x, np.eye(10)[task.train.y], rcond=None)
    xv = np.c_[task.val.x.reshape(len(task.val), -1), np.ones(len(task.val))]
    linear = np.mean(np.argmax(xv @ fit, axis=1) == task.val.y)
    assert 0.2 < linear < teacher.TARGET - 0.03
