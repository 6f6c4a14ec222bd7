"""Strategy-specific flags, declared as data so several strategies can share one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.errors import UsageError


@dataclass(frozen=True)
class Option:
    """One `--flag` a strategy understands; `check` returns an error text or None."""

    name: str
    type: Callable[[str], Any]
    default: Any
    help: str
    choices: Sequence[Any] | None = None
    check: Callable[[Any], str | None] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def validate(self, value: Any) -> None:
        if self.choices is not None and value not in self.choices:
            raise UsageError(f"{self.flag}: {value!r} is not one of {', '.join(map(str, self.choices))}")
        if self.check is not None and value is not None:
            problem = self.check(value)
            if problem:
                raise UsageError(f"{self.flag}: {problem}")


def positive(value: float) -> str | None:
    return None if value > 0 else "must be > 0"


def non_negative(value: float) -> str | None:
    return None if value >= 0 else "must be >= 0"


def flag_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text}")
