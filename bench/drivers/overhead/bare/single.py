"""The leanest single-process loop: one tf.function step, called as a concrete function."""

from __future__ import annotations

from bench.drivers.overhead.bare.common import arguments, optimizer, synthetic_batch, timed_steps


def main() -> None:
    args = arguments(__doc__)
    import tensorflow as tf

    from bench.run import models

    model = models.build(args.model, 0)
    x, y = (tf.constant(a) for a in synthetic_batch(model, args.batch_size))
    opt = optimizer(args.optimizer, args.lr)
    variables = model.trainables

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = model.loss(x, y)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    timed_steps(step.get_concrete_function(), args, "worker0", args.batch_size)


if __name__ == "__main__":
    main()
