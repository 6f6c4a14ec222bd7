"""How every command refuses bad input: one line on stderr, exit status 2, before any work."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

USAGE_EXIT = 2


def refuse(message: object) -> int:
    """Print `bench: error: MESSAGE` and return the usage exit status."""
    print(f"bench: error: {message}", file=sys.stderr)
    return USAGE_EXIT


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        refuse(f"{message} (see --help)")
        raise SystemExit(USAGE_EXIT)
