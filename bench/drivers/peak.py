"""`python -m bench peak [--sizes 512,1024,2048,4096] [--rounds N]`: this machine's peak FLOP/s, as a
run's model FLOP/s utilization divides by (bench.metrics.mfu): matrix products of this TensorFlow build
on this device with every core, chained inside one tf.function (TensorFlow's own kernel, no Python
between products), at each size, in each precision a run computes in (float32, bfloat16, float16:
bench.run.models.precision); a precision's peak is the best rate any size reached.
Recorded in the suite's cache per device (bench.infra.peak), with the command, the date and the
TensorFlow that measured it. A device's data-sheet figure is given to a run instead with
--peak-tflops."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone

from bench.infra import peak
from bench.infra.gpus import computing_gpu
from bench.usage import OneLineParser, refuse

# 4096: on the project's 2-core Xeon (AMX) the rate still grew from 2048 (380 GFLOP/s) to 4096 (392)
SIZES = (512, 1024, 2048, 4096)
CALL_S = 0.2  # one timed call: long enough that its dispatch is noise, short enough for several rounds
ROUNDS = 5


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench peak", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="square matrix sizes (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=ROUNDS, help="timed calls per size; the best counts")
    return p


def chained(tf, a, b, products: int):
    """A tf.function of `products` products, each on the last one's result (none can be skipped)."""
    @tf.function(autograph=False)
    def run(c):
        for _ in range(products):
            c = tf.linalg.matmul(c, b)
        return tf.reduce_sum(c)

    return lambda: run(a)


def rate_at(tf, size: int, rounds: int, dtype: str = "float32") -> float:
    """The best FLOP/s of `rounds` timed calls of chained size x size products in `dtype`."""
    rate, _ = timed_rate(tf, size, rounds, dtype)
    return rate


def timed_rate(tf, size: int, rounds: int, dtype: str = "float32") -> tuple[float, float]:
    """The best FLOP/s of `rounds` timed calls of chained size x size products in `dtype`, and one product's
    seconds."""
    a = tf.cast(tf.random.normal((size, size)), dtype)
    b = tf.cast(tf.random.normal((size, size)) / size**0.5, dtype)  # keeps the chain's values near 1
    once = chained(tf, a, b, 1)
    once().numpy()
    began = time.perf_counter()
    once().numpy()
    one_s = time.perf_counter() - began
    products = max(1, int(CALL_S / max(one_s, 1e-6)))
    call = chained(tf, a, b, products)
    call().numpy()  # traced and warm
    best = 0.0
    for _ in range(rounds):
        began = time.perf_counter()
        call().numpy()
        best = max(best, 2.0 * size**3 * products / (time.perf_counter() - began))
    return best, one_s


# A precision the device does not compute fast in (float16 on most CPUs: converted, not computed) would take
# minutes at the largest sizes: a larger size is measured only while one product takes less than this.
LONGEST_PRODUCT_S = 1.0


def by_precision(tf, sizes: Sequence[int], rounds: int) -> dict[str, dict]:
    """Each precision's best rate, the size it came at, and every size's rate (TFLOP/s)."""
    from bench.run.models.precision import COMPUTE_DTYPE

    out = {}
    for dtype in dict.fromkeys(COMPUTE_DTYPE.values()):
        rates = {}
        for size in sorted(sizes):
            rate, one_s = timed_rate(tf, size, rounds, dtype)
            rates[size] = rate
            if one_s > LONGEST_PRODUCT_S:
                break
        best = max(rates, key=rates.get)
        out[dtype] = {"tflops": rates[best] / 1e12, "size": best,
                      "tflops_by_size": {str(s): r / 1e12 for s, r in rates.items()}}
    return out


def measure(sizes: Sequence[int], rounds: int) -> dict:
    from bench.infra.tools import tensorflow_version
    from bench.run.quiet_tf import import_tensorflow_quietly, start_runtime_quietly

    import_tensorflow_quietly()
    start_runtime_quietly()
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # each size's chain is a function of its own: its "retracing" warning is noise
    precisions = by_precision(tf, sizes, rounds)
    # a GPU by nvidia-smi's name, as each run's devices record it (bench.run.placement.visible): one key both ways
    device = computing_gpu() if tf.config.list_logical_devices("GPU") else None
    return {**precisions["float32"], "dtype": "float32", "by_precision": precisions,
            "device": device or f"{peak.cpu_model()}, every core", "tensorflow": tensorflow_version(),
            "command": f"./run_bench.sh peak --sizes {','.join(map(str, sizes))} --rounds {rounds}",
            "date": datetime.now(timezone.utc).date().isoformat(), "key": peak.device_key(device)}


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s]
        if not sizes or min(sizes) < 16 or args.rounds < 1:
            raise ValueError
    except ValueError:
        return refuse(f"--sizes: comma-separated sizes of at least 16, and --rounds >= 1 "
                      f"(got {args.sizes!r}, {args.rounds})")
    record = measure(sizes, args.rounds)
    kept = peak.keep_highest(record, peak.read(record["key"]))
    where = peak.write(kept, record["key"])
    earlier = "" if kept is record else f" (kept the {kept['tflops'] * 1e3:.4g} measured on {kept['date']}: a busier " \
        "machine only lowers a measured peak)"
    others = ", ".join(f"{dtype} {kept['by_precision'][dtype]['tflops'] * 1e3:.4g}"
                       for dtype in kept.get("by_precision", {}) if dtype != "float32")
    print(f"peak: {record['tflops'] * 1e3:.4g} GFLOP/s float32 at {record['size']} ({record['device']}){earlier}; "
          f"{others} GFLOP/s; recorded in {where}", file=sys.stderr)
    return 0
