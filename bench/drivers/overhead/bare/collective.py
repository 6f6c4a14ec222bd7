"""The leanest loop on TensorFlow's own collectives: MultiWorkerMirroredStrategy (ring),
one process per worker, TF_CONFIG from the cluster argument."""

from __future__ import annotations

import json
import os

from bench.drivers.overhead.bare.common import arguments, optimizer, synthetic_batch, timed_steps


def main() -> None:
    args = arguments(__doc__)
    workers = args.cluster.split(",")
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers},
                                          "task": {"type": "worker", "index": args.index}})
    import tensorflow as tf

    from bench.run import models

    ring = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=ring)
    with strategy.scope():
        model = models.build(args.model, 0)
        opt = optimizer(args.optimizer, args.lr)
    x, y = (tf.constant(a) for a in synthetic_batch(model, args.batch_size, seed=args.index))
    variables = model.trainables

    def replica_step():
        with tf.GradientTape() as tape:
            loss = model.loss(x, y) / strategy.num_replicas_in_sync
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    @tf.function
    def step():
        return strategy.run(replica_step)

    timed_steps(step.get_concrete_function(), args, f"worker{args.index}", args.batch_size,
                read=lambda loss: float(strategy.experimental_local_results(loss)[0]))


if __name__ == "__main__":
    main()
