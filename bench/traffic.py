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


def predicted_per_step(strategy_processes: dict[str, int], gradient_bytes: int, fp16: bool = False) -> dict:
    """{role: (bytes sent, bytes received) per step} by the formulas above. A ps figure is per
    worker step it serves; a run's figure per global step multiplies it by the workers' steps."""
    workers, ps_tasks = strategy_processes.get("worker", 1), strategy_processes.get("ps", 0)
    if ps_tasks:
        share = gradient_bytes / ps_tasks
        return {"worker": (ps_worker_bytes(gradient_bytes), gradient_bytes), "ps": (share, share)}
    ring = ring_allreduce_bytes(gradient_bytes // 2 if fp16 else gradient_bytes, workers)
    return {"worker": (ring, ring)}
