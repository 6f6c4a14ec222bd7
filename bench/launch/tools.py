"""Programs the suite runs (mpirun, horovodrun): the virtual environment's own first,
so that `.venv/bin/python -m bench` works without activating the venv."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def find_tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)
