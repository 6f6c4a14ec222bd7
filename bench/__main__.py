"""`python -m bench`: see bench.cli."""

import sys

from bench.quiet_tf import import_tensorflow_quietly

import_tensorflow_quietly()

from bench.cli import main  # noqa: E402

sys.exit(main())
