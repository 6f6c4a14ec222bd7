"""Communication micro-benchmarks (pytest-benchmark): allreduce through Horovod, mpi4py and
TensorFlow collectives, parameter-server push/pull (TF1 sessions, and a TF2 coordinator's scheduled
function), and the memory-copy ceiling."""

# the collectives the micro-benchmarks time, each under mpirun (or horovodrun) with n ranks
COLLECTIVES = ("mpi4py", "horovod-mpi", "horovod-mpi-tuned", "horovod-gloo", "tf-collective")
