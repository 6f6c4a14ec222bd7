"""Bytes on the emulated cluster's links while a run trains.

A thread reads every host's interface counters a few times a second into
network.csv; after the run, `bytes_per_step` turns them into bytes each host sent
and received per training step over the measured steps (warm-up left out), next
to what the ring and ps formulas predict, and the busiest link's utilisation.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bench.infra.emulated.network import Cluster, counters
from bench.metrics import link_utilisation, measured_steps
from bench.run.process.records import CsvAppender

if TYPE_CHECKING:
    import pandas as pd

NETWORK_FILE = "network.csv"
NETWORK_COLUMNS = ("t_s", "host", "sent_bytes", "received_bytes")
SAMPLE_S = 0.2


class Meter:
    def __init__(self, cluster: Cluster, hosts: list[int], run_dir: Path, run_start: float) -> None:
        self.cluster, self.hosts, self.run_start = cluster, hosts, run_start
        path = run_dir / NETWORK_FILE
        path.write_text(",".join(NETWORK_COLUMNS) + "\n")
        self._out = CsvAppender(path, NETWORK_COLUMNS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Meter:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
        self._out.close()

    def sample(self) -> None:
        now = time.time() - self.run_start
        values = counters(self.cluster)
        for host in self.hosts:
            sent, received = values.get(host, (0, 0))
            self._out.write(t_s=now, host=host, sent_bytes=sent, received_bytes=received)

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - the cluster went away under a failing run; the run says why
                return


def _bytes_between(samples: pd.DataFrame, column: str, start: float, end: float) -> float:
    return float(np.interp(end, samples["t_s"], samples[column]) - np.interp(start, samples["t_s"], samples[column]))


def bytes_per_step(run_dir: Path, labels: dict[int, str], warmup_steps: int, link_mbit: float | None,
                   predicted: dict[str, tuple[float, float]]) -> dict:
    """Per host: bytes sent / received per step over the measured steps, the formulas' figures
    (`predicted[role] = (sent, received)` per step) and the link's busiest-direction utilisation."""
    import pandas as pd  # the launcher's, once the run is over: not in the processes that train

    net = pd.read_csv(run_dir / NETWORK_FILE)
    steps = pd.read_csv(run_dir / "steps.csv")
    measured = measured_steps(steps, warmup_steps)
    if measured.empty or net.empty:
        return {}
    start, end = measured["t_start_s"].min(), measured["t_end_s"].max()
    # a ps serves every step finished in the window, warm-up steps of slower workers included
    served = steps[(steps["t_end_s"] > start) & (steps["t_end_s"] <= end)]
    global_steps = max(served["global_step"].nunique(), 1)
    worker_steps_per_global = len(served) / global_steps
    out = {}
    for host, label in labels.items():
        samples = net[net["host"] == host].sort_values("t_s")
        role, _, index = label.partition(" ")
        if role == "worker":
            mine = measured[measured["worker"] == int(index)]
            if mine.empty:
                continue
            lo, hi, n = mine["t_start_s"].min(), mine["t_end_s"].max(), len(mine)
        else:
            lo, hi, n = start, end, global_steps
        sent = _bytes_between(samples, "sent_bytes", lo, hi)
        received = _bytes_between(samples, "received_bytes", lo, hi)
        p_sent, p_received = predicted.get(role, (None, None))
        scale = worker_steps_per_global if role != "worker" else 1.0
        entry = {"role": label, "steps": int(n), "seconds": float(hi - lo),
                 "sent_per_step": sent / n, "received_per_step": received / n,
                 "predicted_sent_per_step": p_sent * scale if p_sent is not None else None,
                 "predicted_received_per_step": p_received * scale if p_received is not None else None}
        if link_mbit and hi > lo:
            entry["link_utilisation"] = link_utilisation(max(sent, received), hi - lo, link_mbit)
        out[label] = entry
    return out
