"""The leanest multi-tower loop: the CPU split into one logical device per tower, each tower
a slice of the batch, gradients averaged on the first device, one update."""

from __future__ import annotations

from bench.drivers.overhead.bare.common import arguments, optimizer, synthetic_batch, timed_steps


def main() -> None:
    args = arguments(__doc__)
    import tensorflow as tf

    from bench.run import models

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.workers)
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    n, b = args.workers, args.batch_size
    with tf.device(devices[0]):
        model = models.build(args.model, 0)
        x, y = (tf.constant(a) for a in synthetic_batch(model, n * b))
    opt = optimizer(args.optimizer, args.lr)
    variables = model.trainables

    @tf.function
    def step():
        losses, grads = [], []
        for i in range(n):
            with tf.device(devices[i]), tf.GradientTape() as tape:
                loss = model.loss(x[i * b:(i + 1) * b], y[i * b:(i + 1) * b])
            losses.append(loss)
            grads.append(tape.gradient(loss, variables))
        with tf.device(devices[0]):
            mean = [tf.add_n(list(g)) / n for g in zip(*grads)]
            opt.apply_gradients(zip(mean, variables))
            return tf.add_n(losses) / n

    timed_steps(step.get_concrete_function(), args, "worker0", n * b)


if __name__ == "__main__":
    main()
