"""Progress of the chief worker: a tqdm bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import time

PLAIN_EVERY_S = 10.0


class Progress:
    def __init__(self, total_steps: int, label: str, enabled: bool = True, processes: int = 1) -> None:
        self.total = total_steps
        self.label = label
        # the chief sees its own examples/s: of a run of several processes, say so (the run's
        # figure, every worker's together, is in the closing line)
        self.rate_label = f"examples/s (worker 0 of {processes})" if processes > 1 else "examples/s"
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
            rate = {"ex_s" if self.rate_label == "examples/s" else "ex_s_worker0": f"{examples_per_s:,.0f}"}
            self._bar.set_postfix(loss=f"{loss:.4f}", **rate, refresh=False)
        else:
            now = time.monotonic()
            if now - self._last_print >= PLAIN_EVERY_S or global_step >= self.total:
                self._last_print = now
                print(f"{self.label}: step {global_step}/{self.total} loss {loss:.4f} "
                      f"{examples_per_s:,.0f} {self.rate_label}", file=sys.stderr, flush=True)
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
