"""Communication micro-benchmarks (pytest-benchmark): allreduce through Horovod, mpi4py and
TensorFlow collectives, parameter-server push/pull (TF1 sessions, and a TF2 coordinator's scheduled
function), and the memory-copy ceiling."""
