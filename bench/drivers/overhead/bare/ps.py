"""The leanest between-graph parameter-server job, as in TensorFlow's own distributed MNIST
example: a tf.distribute.Server per task, replica_device_setter, a MonitoredTrainingSession
with StopAtStepHook, `sess.run(train_op)` in a loop; `--sync` wraps the optimizer in
SyncReplicasOptimizer over all workers. A ps task serves until it is killed."""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.drivers.overhead.bare.common import arguments, now, optimizer, synthetic_batch, write_result

READY_FILE = "chief-ready"


def cluster_spec(text: str) -> dict[str, list[str]]:
    jobs = {}
    for part in text.split(";"):
        name, _, hosts = part.partition(":")
        jobs[name] = hosts.split(",")
    return jobs


def main() -> None:
    args = arguments(__doc__)
    import tensorflow as tf

    from bench.run import models
    from bench.run.models.base import initial_values

    tf.compat.v1.disable_eager_execution()
    spec = tf.train.ClusterSpec(cluster_spec(args.cluster))
    config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{args.index}"])
    server = tf.distribute.Server(spec, job_name=args.role, task_index=args.index,
                                  config=config if args.role == "worker" else None)
    if args.role == "ps":
        server.join()
        return
    chief = args.index == 0
    device = f"/job:worker/task:{args.index}"
    with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(worker_device=device, cluster=spec)):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        model = models.build(args.model, 0)
        x, y = (tf.constant(a) for a in synthetic_batch(model, args.batch_size, seed=args.index))
        loss = model.loss(x, y)
        opt = optimizer(args.optimizer, args.lr)
        hooks = [tf.compat.v1.train.StopAtStepHook(last_step=args.steps)]
        if args.sync:
            opt = tf.compat.v1.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=args.workers,
                                                           total_num_replicas=args.workers)
            hooks.append(opt.make_session_run_hook(chief))
        train_op = opt.minimize(loss, global_step=global_step, var_list=model.trainables)
    with tf.device("/job:ps/task:0"):  # start barrier: nobody's timed steps run alone
        barrier = tf.queue.FIFOQueue(args.workers, tf.int32, shapes=(), shared_name="bare_barrier")
        arrive, arrived = barrier.enqueue(args.index), barrier.size()
    scaffold = tf.compat.v1.train.Scaffold(init_feed_dict=initial_values())
    with tf.compat.v1.train.MonitoredTrainingSession(master=server.target, is_chief=chief, hooks=hooks,
                                                     scaffold=scaffold, config=config, save_checkpoint_secs=None,
                                                     save_summaries_steps=None, log_step_count_steps=None) as sess:
        if chief:
            Path(args.out, READY_FILE).touch()
        raw = sess._tf_sess()
        raw.run(arrive)
        while raw.run(arrived) < args.workers:
            time.sleep(0.01)
        local = 0
        while not sess.should_stop():
            if local == args.warmup:
                start = now()
            sess.run(train_op)
            local += 1
        end = now()
        write_result(args.out, f"worker{args.index}", (local - args.warmup) * args.batch_size, start, end)
        os._exit(0)  # a sync chief's queue runner may be blocked for a step that never comes


if __name__ == "__main__":
    main()
