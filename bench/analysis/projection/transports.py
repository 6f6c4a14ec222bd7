"""How one transport moves a step's bytes between hosts (`Transport`), built from a transport
profile (bench.analysis.projection.profile: the rates and costs, each with its range and
source, are data there), and the one constant of the projection that is a fact of the
model rather than of the cluster (`FORWARD_SHARE`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.metrics import BACKWARD_PER_FORWARD

FORWARD_SHARE = 1 / (1 + BACKWARD_PER_FORWARD)  # of a step's compute (bench.metrics.BACKWARD_PER_FORWARD)
FORWARD_SHARE_SOURCE = "backward = 2 x forward FLOPs (Kaplan et al. 2020, section 2.1: 2N forward, 4N backward)"


@dataclass(frozen=True)
class Transport:
    """How one transport moves a step's bytes between hosts.

    `flow_share`: the fraction of the link's bit rate one flow of it reaches; `link_share`: what
    all flows together reach; `process_bytes_per_s`: what one process of it moves per second when
    its own CPU work binds, in both directions together (None: no such limit known); `host_copies`:
    GPU tensors cross PCIe to host memory and back; `message_s`: what a ps task's process spends on
    each tensor it takes in or sends out, beyond its bytes (a collective's fixed cost is its hops'
    latency instead); `latency_s`: one message's fixed cost between hosts; `fusion_bytes`,
    `cycle_s`: Horovod's fusion threshold and cycle (0: each tensor alone, at once);
    `steps_per_function`: the training steps in each such function;
    `function_s`: what TensorFlow 2's ClusterCoordinator spends per function it schedules (None:
    no coordinator in this software); `rate_by_bytes`: ((bytes, process bytes/s), ...) where one
    message's rate depends on its size (gRPC before TensorFlow's August 2017 upgrade: a large
    tensor's RecvTensor slowed with its size; a collective's bus bandwidth at each buffer size,
    as `./run_bench.sh profile` measures it), between its points log-log, flat beyond them;
    `rate_by_workers`: ((workers, bytes/s), ...) where a ps task's rate depends on how many workers
    push and pull at once (`./run_bench.sh profile` measures it with 1, 2, 4 ...), read between its
    points log-log, flat beyond them (`concurrency_share`);
    `cores_measured`: the cores of the host whose process's rate was measured (None: not recorded);
    `cores_gain`: its rate's gain per doubling of the cores its streams use (`cores_share`), measured
    down to `least_cores_measured`;
    `compute_stretch`: how much longer a CPU device's compute takes beside the transport's own
    threads (Horovod's loop, which over MPI polls while it waits for the other ranks);
    `rate_share_computing`: the share of its rate a reduction (or a ps task) keeps while a CPU
    device computes beside it (its threads and the compute share the host's CPU); `latency_busy_cpu_s`: what a
    busy CPU adds to a message's fixed cost between hosts whose CPUs compute, beyond the wire's `latency_s`
    (0: not measured; `busy_latency_s`)."""

    name: str
    flow_share: float
    process_bytes_per_s: float | None
    host_copies: bool
    source: str
    link_share: float = 1.0
    message_s: float = 0.0
    latency_s: float = 0.0
    fusion_bytes: int = 0
    cycle_s: float = 0.0
    function_s: float | None = None
    steps_per_function: int = 1
    rate_by_bytes: tuple[tuple[float, float], ...] = ()
    rate_by_workers: tuple[tuple[float, float], ...] = ()
    compute_stretch: float = 1.0
    rate_share_computing: float = 1.0
    latency_busy_cpu_s: float = 0.0
    cores_measured: float | None = None
    cores_gain: float = 1.0
    least_cores_measured: float | None = None  # the fewest cores its rate was measured with (the gain's range)

    def busy_latency_s(self) -> float:
        """A message's fixed cost between hosts whose CPUs compute: the wire's, and what a busy CPU adds to it."""
        return self.latency_s + max(0.0, self.latency_busy_cpu_s)

    def message_rate(self, nbytes: float, concurrent: int | None = None, computing: bool = False,
                     cores_per_host: float | None = None) -> float | None:
        """What one process of it moves per second in a message of `nbytes`, serving `concurrent`
        workers at once (None: as its rate was measured), `computing`: beside a busy CPU on its host
        (at `rate_share_computing` of its rate), on a host of `cores_per_host` (Cluster.cores_per_host)."""
        rate = _log_log(self.rate_by_bytes, nbytes) if self.rate_by_bytes else self.process_bytes_per_s
        if rate is None:
            return None
        return rate * self.concurrency_share(concurrent) * self.cores_share(concurrent, cores_per_host) * \
            (self.rate_share_computing if computing else 1.0)

    def concurrency_share(self, concurrent: int | None) -> float:
        """A ps task's rate serving `concurrent` workers at once over its rate as measured (1 without a curve)."""
        if concurrent is None or not self.rate_by_workers or not self.process_bytes_per_s:
            return 1.0
        return _log_log(self.rate_by_workers, concurrent) / self.process_bytes_per_s

    def cores_share(self, concurrent: int | None, cores_per_host: float | None) -> float:
        """A ps task's rate on a host of `cores_per_host` serving `concurrent` workers at once over its rate at
        that concurrency on the host it was measured on (`cores_measured`, whose rate and curve stand there
        as measured). Each worker's stream is served by a thread of its own, so the streams use
        min(workers, cores) cores; each doubling of those multiplies the rate by `cores_gain`, held between
        1 (no gain) and 2 (linear), where a measurement's noise may put it (1 where the profile does not
        say its host's cores)."""
        return min(max(self.cores_gain, 1.0), 2.0) ** math.log2(self.cores_used(concurrent, cores_per_host))

    def cores_used(self, concurrent: int | None, cores_per_host: float | None) -> float:
        """The cores `concurrent` streams use on hosts of `cores_per_host` over those they use on the profile's
        (1 where either is not known)."""
        if concurrent is None or self.cores_measured is None or cores_per_host is None:
            return 1.0
        return min(concurrent, cores_per_host) / min(concurrent, self.cores_measured)

    def cores_extrapolated(self, concurrent: int | None, cores_per_host: float | None) -> float:
        """How far (a factor >= 1) the cores `concurrent` streams use on hosts of `cores_per_host` lie outside
        those the gain was measured between (`least_cores_measured` to `cores_measured`): 1 inside them."""
        if concurrent is None or self.cores_measured is None or cores_per_host is None:
            return 1.0
        used = min(concurrent, cores_per_host)
        most = min(concurrent, self.cores_measured)
        least = min(most, self.least_cores_measured or most)
        return max(used / most, least / used, 1.0)

    def network_bytes_per_s(self, link_gbit: float, flows: int = 1, nbytes: float | None = None) -> float:
        """The rate of a transfer between hosts carried by `flows` flows (processes, or sockets) at once;
        `nbytes`: its buffer's size, where the transport's rate depends on it (`rate_by_bytes`)."""
        link = link_gbit * 1e9 / 8
        one = self.flow_share * link
        process = self.process_bytes_per_s if nbytes is None else self.message_rate(nbytes)
        if process is not None:
            one = min(one, process)
        return min(self.link_share * link, flows * one)


def _log_log(points: tuple[tuple[float, float], ...], x: float) -> float:
    """The value at `x` of ((x, value), ...) ascending: log-log between points, flat beyond them."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, v0), (x1, v1) in zip(points, points[1:], strict=False):
        if x <= x1:
            share = math.log(x / x0) / math.log(x1 / x0)
            return math.exp(math.log(v0) + share * (math.log(v1) - math.log(v0)))
    return points[-1][1]
