"""How every command refuses bad input: one line on stderr, exit status 2, before any work."""

from __future__ import annotations

import argparse
import re
import sys
from typing import NoReturn

from bench.errors import UsageError

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


def parse_duration(text: str, flag: str, least_s: float = 60.0) -> float:
    """Seconds from "10m", "90s", "1.5h" or a bare number of seconds, at least `least_s`; else a UsageError
    naming `flag`."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match:
        raise UsageError(f"{flag}: give a time such as 10m, 90s or 600, got {text!r}")
    seconds = float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]
    if seconds < least_s:
        raise UsageError(f"{flag}: at least {least_s:.0f} s, got {text}")
    return seconds
