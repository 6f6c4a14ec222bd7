"""Model FLOP/s utilization: the FLOPs a run counts (the projection's own count), checked against an
independent count; the peak it divides by; and the figures a run's summary gets."""

from __future__ import annotations

import json
import time

import pytest
import tensorflow as tf

from bench.drivers import peak as peak_benchmark
from bench.infra import peak
from bench.metrics import model_flops_per_example
from bench.run import models
from bench.run.models import tensors
from bench.run.process import utilization

# forward FLOPs per example by hand: 2 x multiply-adds of every matrix product and convolution
BY_HAND = {
    "mlp": 2 * (784 * 100 + 100 * 10),
    "cnn": 2 * (28 * 28 * 32 * 5 * 5 * 1 + 14 * 14 * 64 * 5 * 5 * 32 + 7 * 7 * 64 * 256 + 256 * 10),
}


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_the_flop_count_is_the_hand_count(name):
    assert tensors.of(name).forward_gflops * 1e9 == pytest.approx(BY_HAND[name], rel=1e-9)


def test_resnet20s_flop_count_agrees_with_tensorflows_profiler_within_5_percent():
    with tf.Graph().as_default():
        model = models.build("resnet20", 0)
        function = tf.function(lambda x: model.logits(x, training=False))
        graph = function.get_concrete_function(tf.TensorSpec((1, *model.input_shape), tf.float32)).graph
        options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
        options["output"] = "none"
        profiled = tf.compat.v1.profiler.profile(graph, options=options).total_float_ops
    assert tensors.of("resnet20").forward_gflops * 1e9 == pytest.approx(profiled, rel=0.05)


def test_a_runs_mfu_is_its_models_flops_per_second_over_the_machines_measured_peak(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    record = {"model": {"forward_flops_per_example": 1e6}, "config": {},
              "environment": {"cpu_model": "Test CPU", "cpu_count": 2, "gpus": []}}
    assert utilization.figures(record, 1000.0)["mfu"] is None  # nothing measured yet: said, not guessed
    peak.write({"tflops": 0.01, "dtype": "float32", "command": "./run_bench.sh peak", "date": "today"},
               peak.device_key(None, "Test CPU", 2))
    out = utilization.figures(record, 1000.0)
    assert out["model_flops_per_example"] == model_flops_per_example(1e6) == 3e6
    assert out["achieved_tflops"] == pytest.approx(3e9 / 1e12)
    assert out["mfu"] == pytest.approx(3e9 / 1e10) and "./run_bench.sh peak" in out["peak_from"]
    typed = utilization.figures({**record, "config": {"peak_tflops": 0.1}}, 1000.0)
    assert typed["mfu"] == pytest.approx(3e9 / 1e11) and typed["peak_from"].startswith("--peak-tflops 0.1")
    # emulated hosts with a CPU budget each share the one machine's peak
    emulated = {**record, "network": {"hosts": {"worker 0": {}, "worker 1": {}}, "host_cores": 0.5}}
    assert utilization.figures(emulated, 1000.0)["mfu"] == pytest.approx(3e9 / (1e10 * 0.5))


def test_the_peak_benchmark_reaches_a_plain_matmul_loops_flops():
    # the same size, best of 7 calls each, interleaved so that a busy machine slows both alike
    size, products = 256, 20
    a, b = tf.random.normal((size, size)), tf.random.normal((size, size)) / size**0.5
    chained = peak_benchmark.chained(tf, a, b, products)
    chained().numpy()
    plain_best = chained_best = 0.0
    for _ in range(7):
        began = time.perf_counter()
        for _ in range(products):
            c = tf.linalg.matmul(a, b)
        c.numpy()
        plain_best = max(plain_best, 2 * size**3 * products / (time.perf_counter() - began))
        began = time.perf_counter()
        chained().numpy()
        chained_best = max(chained_best, 2 * size**3 * products / (time.perf_counter() - began))
    assert chained_best >= 0.95 * plain_best, (chained_best, plain_best)


def test_peak_records_what_measured_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    record = peak_benchmark.measure([64, 128], rounds=1)
    assert record["tflops"] > 0 and record["size"] in (64, 128) and record["dtype"] == "float32"
    assert record["command"].startswith("./run_bench.sh peak") and record["tensorflow"]
    peak.write(record, record["key"])
    assert json.loads(peak.path(peak.device_key()).read_text())["tflops"] == record["tflops"]


@pytest.mark.parametrize("placement, count, words", [
    ({"scheduler": "slurm", "hosts": {"worker 0": {"node": "n1", "address": "10.0.0.1"},
                                      "worker 1": {"node": "n2", "address": "10.0.0.2"},
                                      "ps 0": {"node": "n2", "address": "10.0.0.2"}}},
     2.0, "2 nodes of a Slurm allocation, each one device"),
    ({"launch": "ssh", "ssh": "ssh", "hosts": {"worker 0": "a", "worker 1": "b", "ps 0": "c"}},
     3.0, "3 hosts, each one device"),
    ({"launch": "ssh", "ssh": "ssh", "hosts": {"worker 0": "a"}}, 1.0, "one machine"),  # a one-process run's host
    (None, 1.0, "one machine"),
])
def test_the_devices_a_peak_is_multiplied_by_are_the_distinct_hosts_of_any_placement(placement, count, words):
    assert utilization.devices({"placement": placement}) == (count, words)


def gpu_process(host: str, gpus: list[int], seen: int | None = None, name: str = "NVIDIA Test GPU") -> dict:
    """A process's devices record (bench.run.placement.visible), TensorFlow seeing `seen` of its GPUs: each the GPU
    of the host's index it was given, by its UUID (/physical_device:GPU:i inside the process)."""
    count = len(gpus) if seen is None else seen
    return {"host": host, "gpus": gpus, "gpu_uuids": [f"GPU-{host}-{g}" for g in gpus],
            "tensorflow_gpus": [{"device": f"/physical_device:GPU:{i}", "name": name, "uuid": f"GPU-{host}-{gpus[i]}"}
                                for i in range(count)]}


def test_a_gpu_runs_peak_is_one_gpus_times_the_gpus_its_processes_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    peak.write({"tflops": 100.0, "dtype": "float32", "command": "./run_bench.sh peak", "date": "today"},
               peak.device_key("NVIDIA Test GPU"))
    # a mirrored run of 4 towers in one process, and 2 hosts of 2 ranks: 4 GPUs' peak either way
    towers = {"devices": {"worker 0": gpu_process("a", [0, 1, 2, 3])}}
    ranks = {"devices": {f"worker {i}": gpu_process("ab"[i % 2], [i // 2]) for i in range(4)}}
    for record in (towers, ranks):
        assert utilization.devices(record)[0] == 4.0
        peak_s, source = utilization.peak_flops({**record, "config": {}, "environment": {"gpus": ["x"]}})
        assert peak_s == pytest.approx(4 * 100e12) and "x 4 GPU(s)" in source


def test_the_cpu_build_of_tensorflow_on_a_gpu_host_divides_by_the_cpus_peak(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    peak.write({"tflops": 0.5, "dtype": "float32", "command": "./run_bench.sh peak", "date": "today"},
               peak.device_key(None, "Test CPU", 8))
    record = {"config": {}, "environment": {"cpu_model": "Test CPU", "cpu_count": 8, "gpus": ["NVIDIA Test GPU"] * 4},
              "devices": {"worker 0": gpu_process("a", [0], seen=0)}}  # given a GPU, TensorFlow saw none
    peak_s, _ = utilization.peak_flops(record)
    assert peak_s == pytest.approx(0.5e12)
