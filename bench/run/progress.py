"""Progress of the chief worker: a tqdm bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import time

PLAIN_EVERY_S = 10.0


class Progress:
    def __init__(self, total_steps: int, label: str, enabled: bool = True) -> None:
        self.total = total_steps
        self.label = label
        self.enabled = enabled
        self._bar = None
        self._last_print = 0.0
        self._last_step = 0
        self._start = time.monotonic()
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, desc=label, unit="step", dynamic_ncols=True)

    def update(self, global_step: int, loss: float, examples_per_s: float) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(global_step - self._last_step)
            self._bar.set_postfix(loss=f"{loss:.4f}", ex_s=f"{examples_per_s:,.0f}", refresh=False)
        else:
            now = time.monotonic()
            if now - self._last_print >= PLAIN_EVERY_S or global_step >= self.total:
                self._last_print = now
                print(f"{self.label}: step {global_step}/{self.total} loss {loss:.4f} "
                      f"{examples_per_s:,.0f} examples/s", file=sys.stderr, flush=True)
        self._last_step = global_step

    def message(self, text: str) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
