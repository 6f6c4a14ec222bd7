"""Bytes that one training step moves over the network, by the formulas of each
exchange (NCCL's tests derive the ring one). S = gradient bytes of one worker."""

from __future__ import annotations


def ring_allreduce_bytes(gradient_bytes: int, ranks: int) -> int:
    """Sent (and received) per rank per step by ring allreduce: 2(n-1)/n x S."""
    return 0 if ranks < 2 else int(2 * (ranks - 1) * gradient_bytes / ranks)


def ps_worker_bytes(gradient_bytes: int) -> int:
    """Sent per worker per step to the ps tasks (gradients); it receives as much (parameters)."""
    return gradient_bytes


def ps_server_bytes(gradient_bytes: int, workers: int, ps_tasks: int) -> int:
    """Received per ps task per step when k tasks share the variables evenly: n x S / k."""
    return int(workers * gradient_bytes / max(ps_tasks, 1))
