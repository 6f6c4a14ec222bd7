"""A cluster as its users describe it: devices in all, devices per host, the host's network
link, the bandwidth inside a host, and one device's examples/s at its batch with its spread
from step to step. Nothing of it runs here; bench.analysis.projection.allreduce and
.parameter_servers predict its step from these facts, the model's own tensors
(bench.run.models.tensors) and a transport profile (bench.analysis.projection.profile).

A cluster described by its GPUs (`project --device-examples-per-s`) and one calibrated from
runs on CPU workers (`project --from`) are the same model; the second's devices are its
hosts' CPUs (`on_host`): their tensors are in host memory already."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from bench.analysis.projection.costs import synchronous_compute_s
from bench.analysis.projection.transports import FORWARD_SHARE


@dataclass(frozen=True)
class Cluster:
    workers: int  # devices in all, each training a batch of `batch_size`
    devices_per_host: int
    link_gbit: float  # each host's network link, each way
    device_examples_per_s: float  # one device alone, at `batch_size`
    batch_size: int
    intra_host_bytes_per_s: float  # a device to its host, and devices of one host through it
    compute_sd_s: float = 0.0  # one device's step compute, its standard deviation from step to step
    on_host: bool = False  # the devices are the hosts' CPUs: no copy to host memory, no GPU transport
    # each device's host work per step outside compute and the exchange, beyond what one device
    # alone does (its strategy's: Python, dispatch, fetching results; from its 1-worker run)
    other_s: float = 0.0
    # the compute given was measured with the exchange's own threads beside it (runs of the same
    # strategy on the same cores), so a transport's compute_stretch is in it already
    stretch_measured: bool = False
    # each host's cores as nproc counts them (hardware threads), as bench.analysis.projection.cores decided
    # them: given, else those of the host the profile was measured on; None where neither is known
    cores_per_host: float | None = None

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

    def compute_scaled(self, scale: float) -> Cluster:
        """The cluster with every device's compute, and its spread, `scale` times as long."""
        return dataclasses.replace(self, device_examples_per_s=self.device_examples_per_s / scale,
                                   compute_sd_s=self.compute_sd_s * scale)

    def slowest(self) -> Cluster:
        """The cluster as a synchronous step sees it: every device as slow as the expected slowest
        of them (the last gradient of each tensor is ready when the slowest device's is)."""
        slowest_s = synchronous_compute_s(self.workers, self.compute_s, self.compute_sd_s)
        return dataclasses.replace(self, device_examples_per_s=self.batch_size / slowest_s, compute_sd_s=0.0)

    def devices_on(self, host: int) -> int:
        return min(self.devices_per_host, self.workers - host * self.devices_per_host)


@dataclass(frozen=True)
class StepTerms:
    """One step of every device, split as bench.run.process.breakdown splits a measured one."""

    step_s: float
    compute_s: float
    exposed_communication_s: float  # communication the backward pass did not hide
    waiting_s: float = 0.0
    other_s: float = 0.0  # Cluster.other_s
    # the time a collective is in flight in the step, hidden or not (0 where not modelled: a ps's exchange)
    collective_s: float = 0.0

    @classmethod
    def of(cls, step_s: float, compute_s: float, waiting_s: float = 0.0, other_s: float = 0.0,
           collective_s: float = 0.0) -> StepTerms:
        return cls(step_s, compute_s, max(0.0, step_s - compute_s - waiting_s - other_s), waiting_s, other_s,
                   collective_s)
