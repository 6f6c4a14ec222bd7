"""Communication micro-benchmarks (pytest-benchmark): allreduce through Horovod, mpi4py and
TensorFlow collectives, parameter-server push/pull, and the memory-copy ceiling."""
