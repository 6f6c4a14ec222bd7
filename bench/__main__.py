"""`python -m bench`: see bench.cli."""

import sys

from bench.cli import main
from bench.run.process.leave import leave

code = main()
if "tensorflow" in sys.modules:
    # Everything the run wrote is closed by now; TensorFlow's teardown at interpreter exit takes
    # a second or more and does nothing a finished run needs. A Horovod rank shuts Horovod down
    # first: that finalizes MPI, which mpirun (or srun) waits for.
    horovod = sys.modules.get("horovod.tensorflow")
    if horovod is not None and horovod.is_initialized():
        horovod.shutdown()
    leave(code)
sys.exit(code)
