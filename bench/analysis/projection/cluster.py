"""A GPU cluster as its users describe it: devices in all, devices per host, the host's
network link, the bandwidth inside a host, and one device's examples/s at its batch.
Nothing of it runs here; bench.analysis.projection.allreduce and .parameter_servers predict its
step from these facts, the model's own tensors (bench.analysis.projection.tensors) and a
transport profile (bench.analysis.projection.profile)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.analysis.projection.transports import FORWARD_SHARE


@dataclass(frozen=True)
class Cluster:
    workers: int  # devices in all, each training a batch of `batch_size`
    devices_per_host: int
    link_gbit: float  # each host's network link, each way
    device_examples_per_s: float  # one device alone, at `batch_size`
    batch_size: int
    intra_host_bytes_per_s: float  # a device to its host, and devices of one host through it

    @property
    def hosts(self) -> int:
        return math.ceil(self.workers / self.devices_per_host)

    @property
    def compute_s(self) -> float:
        """One device's step: forward, backward and update of its batch."""
        return self.batch_size / self.device_examples_per_s

    @property
    def forward_s(self) -> float:
        return FORWARD_SHARE * self.compute_s

    @property
    def backward_s(self) -> float:
        return self.compute_s - self.forward_s

    def devices_on(self, host: int) -> int:
        return min(self.devices_per_host, self.workers - host * self.devices_per_host)


@dataclass(frozen=True)
class StepTerms:
    """One step of every device, split as bench.run.process.breakdown splits a measured one."""

    step_s: float
    compute_s: float
    exposed_communication_s: float  # communication the backward pass did not hide
    waiting_s: float = 0.0

    @classmethod
    def of(cls, step_s: float, compute_s: float, waiting_s: float = 0.0) -> StepTerms:
        return cls(step_s, compute_s, max(0.0, step_s - compute_s - waiting_s), waiting_s)
