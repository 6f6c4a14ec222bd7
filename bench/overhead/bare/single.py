"""The leanest single-process loop: one tf.function step, called as a concrete function."""

from __future__ import annotations

from bench.overhead.bare.common import arguments, now, optimizer, synthetic_batch, write_result


def main() -> None:
    args = arguments(__doc__)
    import tensorflow as tf

    from bench import models

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

    run = step.get_concrete_function()
    for _ in range(args.warmup):
        run()
    start = now()
    for _ in range(args.steps - args.warmup):
        loss = run()
    float(loss)
    write_result(args.out, "worker0", (args.steps - args.warmup) * args.batch_size, start, now())


if __name__ == "__main__":
    main()
