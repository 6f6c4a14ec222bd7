"""`python -m bench`: see bench.cli."""

import os
import sys

from bench.cli import main

code = main()
if "tensorflow" in sys.modules and "horovod" not in sys.modules:
    # Everything the run writes is closed by now; TensorFlow's own teardown at interpreter exit
    # takes a second or more and does nothing a finished run needs. (Horovod's atexit shutdown
    # finalizes MPI, which mpirun waits for, so a rank leaves normally.)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
