"""`python -m bench.overhead`: the same as `python -m bench overhead`."""

import sys

from bench.cli import main

sys.exit(main(["overhead", *sys.argv[1:]]))
