"""Which of a worker's steps carry timestamps for the step split (bench.metrics.split_steps).

Its own module, without pandas: every worker, ps task and rank imports it, and only the
process that closes the run reads breakdown.csv (bench.run.process.breakdown)."""

# Every worker stamps the same local steps (so a collective's wait can be told): one in
# STAMP_EVERY of the first DENSE_STEPS, so that a short run has enough split steps, then one in
# STAMP_EVERY_LATER. A stamped step costs the executor ~0.08 ms more (11% of an mlp step of
# 0.7 ms on this machine, 0.1% of a cnn step): one step in 50 makes that 0.2% of a long run.
STAMP_EVERY, DENSE_STEPS, STAMP_EVERY_LATER = 5, 200, 50


def stamped(local_step: int) -> bool:
    """Whether a worker stamps its step `local_step` (counted from 0)."""
    return local_step % (STAMP_EVERY if local_step < DENSE_STEPS else STAMP_EVERY_LATER) == 0
