"""`python -m bench all`: the default comparison. Until more strategies exist it runs
the single-process baseline on every model."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from bench.cli import config_from_args
from bench.errors import UsageError
from bench.launcher import launch


def main(argv: Sequence[str]) -> int:
    status = 0
    for model, data in (("mlp", "digits"), ("cnn", "synthetic")):
        try:
            config = config_from_args(["--model", model, "--data", data, *argv])
        except UsageError as exc:
            print(f"bench: error: {exc}", file=sys.stderr)
            return 2
        status = max(status, launch(config))
    return status
