"""Gradient compression, a setting of the strategies that exchange over a network: what each
setting is and which strategies take which, without TensorFlow (what it does to a tensor is
strategies/workers/compression.py; the bytes it saves, bench.metrics.compressed_fraction).

- none: float32, as computed.
- fp16: float16 on the wire, float32 again where it is applied (half the bytes).
- topk:RATIO: each worker sends only the RATIO largest-magnitude entries of each dense
  gradient, as (value, int32 index) pairs; what it does not send is kept and added to its
  next gradient (error feedback, Seide et al. 2014; Stich et al. 2018). A table's sparse
  gradient (its touched rows) is already small and goes as it is.
"""

from __future__ import annotations

from bench.options import Option

NONE, FP16, TOPK = "none", "fp16", "topk"


def parse(text: str) -> tuple[str, float | None]:
    """(kind, top-k ratio or None); ValueError for anything else."""
    if text in (NONE, FP16):
        return text, None
    kind, sep, ratio = text.partition(":")
    try:
        value = float(ratio) if kind == TOPK and sep else None
    except ValueError:
        value = None
    if value is None or not 0 < value <= 1:
        raise ValueError(f"expected none, fp16 or topk:RATIO with 0 < RATIO <= 1, got {text!r}")
    return TOPK, value


def option(kinds: tuple[str, ...], strategy: str) -> Option:
    """The --compression flag of a strategy that takes `kinds`."""
    def check(text: str) -> str | None:
        try:
            kind, _ = parse(text)
        except ValueError as exc:
            return str(exc)
        if kind not in kinds:
            return f"{strategy} takes {' or '.join(kinds)}, not {kind} (top-k: allreduce, ps-async, ps-sync)"
        return None

    return Option("compression", str, NONE,
                  "gradients on the wire: none, fp16, or topk:RATIO with error feedback (allreduce, ps-async, "
                  "ps-sync; local-sgd: none or fp16, for its averages)", check=check)


def labelled(label: str, setting: str) -> str:
    """A variant's label with its compression, when there is one."""
    return label if setting == NONE else f"{label} {setting}"
