"""The leanest Horovod loop, in the style of Horovod's tensorflow2_synthetic_benchmark.py:
DistributedGradientTape, rank 0's weights broadcast after the first step; run under mpirun."""

from __future__ import annotations

from bench.drivers.overhead.bare.common import arguments, optimizer, synthetic_batch, timed_steps


def main() -> None:
    args = arguments(__doc__)
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from bench.run import models

    hvd.init()
    model = models.build(args.model, 0)
    x, y = (tf.constant(a) for a in synthetic_batch(model, args.batch_size, seed=hvd.rank()))
    opt = optimizer(args.optimizer, args.lr)
    variables = model.trainables

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = model.loss(x, y)
        tape = hvd.DistributedGradientTape(tape)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    run = step.get_concrete_function()
    run()
    hvd.broadcast_variables(model.weights + opt.variables(), root_rank=0)
    timed_steps(run, args, f"worker{hvd.rank()}", args.batch_size, warmed=1)


if __name__ == "__main__":
    main()
