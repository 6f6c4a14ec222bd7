"""`python -m bench`: see bench.cli."""

import sys

from bench.run.phase import listen_for_stack_requests

listen_for_stack_requests()  # first: the launcher's request for a stack (SIGUSR1) would otherwise kill this process

from bench.cli import main  # noqa: E402
from bench.run.process.leave import leave  # noqa: E402

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
