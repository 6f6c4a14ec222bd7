"""How much the harness costs: `single` through the full harness against a minimal
hand-written tf.function loop on the same model, batch and data, in one process.

    python -m bench.presets.overhead --model mlp --batch-size 128 --steps 2000 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from bench.run.quiet_tf import import_tensorflow_quietly


def bare_loop(model_name: str, batch_size: int, steps: int) -> float:
    """Examples/s of the smallest loop that trains the model: no records, one sync at the end."""
    import tensorflow as tf

    from bench import data, models

    model = models.build(model_name, 0)
    split = data.load("synthetic", model.input_shape, batch_size, 0).train
    x, y = tf.constant(split.x), tf.constant(split.y)
    opt = tf.compat.v1.train.GradientDescentOptimizer(0.01)
    variables = model.trainables

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = model.loss(x, y)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    for _ in range(20):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    float(loss)
    return steps * batch_size / (time.perf_counter() - start)


def harness_single(model_name: str, batch_size: int, steps: int) -> float:
    """Throughput that the harness records for `single` on the same job."""
    from bench.config import RunConfig
    from bench.launch.launcher import run_in_process
    from bench.run.records import RunFolder
    from bench.validation import validate

    with tempfile.TemporaryDirectory() as out:
        config = validate(RunConfig(model=model_name, data="synthetic", batch_size=batch_size,
                                    steps=steps + 20, warmup_steps=20, lr=0.01, output=out))
        run_in_process(config)
        folder = next(RunFolder(p) for p in __import__("pathlib").Path(out).iterdir())
        return folder.read_run()["summary"]["throughput_examples_per_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="mlp")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    import_tensorflow_quietly()
    bare, harness = [], []
    for _ in range(args.repeats):  # interleaved so drift hits both alike
        bare.append(bare_loop(args.model, args.batch_size, args.steps))
        harness.append(harness_single(args.model, args.batch_size, args.steps))
    b, h = statistics.median(bare), statistics.median(harness)
    print(f"model {args.model}, batch {args.batch_size}, {args.steps} steps, median of {args.repeats}")
    print(f"bare tf.function loop : {b:12,.0f} examples/s   runs: {', '.join(f'{v:,.0f}' for v in bare)}")
    print(f"single via harness    : {h:12,.0f} examples/s   runs: {', '.join(f'{v:,.0f}' for v in harness)}")
    print(f"ratio single / bare   : {h / b:.3f}")


if __name__ == "__main__":
    main()
