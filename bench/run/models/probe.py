"""`python -m bench.run.models.probe SPEC`: build a user's model once (seed 0) and print what
bench.run.models.user.Probe holds, as one line of JSON; a refusal is one `bench: error:` line, exit 2."""

from __future__ import annotations

import dataclasses
import json
import sys

from bench.errors import UsageError
from bench.run.models import user


def main(argv: list[str]) -> int:
    try:
        found = user.Probe.of(user.factory(argv[0])(0))
    except UsageError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(dataclasses.asdict(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
