"""multi-tower: in-graph replication built by hand, as the seed's CIFAR-10 multi-GPU example.

One process, one graph, N towers on N devices (GPUs, or logical CPU devices).
Variables live on one parameter device; each tower computes gradients on its
slice of the global batch; the gradients are averaged on the parameter device
and applied once.
"""

from bench.config import RunConfig
from bench.run.contract import ALWAYS, SparseExchange
from strategies._towers import TowerStrategy


class MultiTower(TowerStrategy):
    name = "multi-tower"
    in_convergence_answer = ALWAYS
    description = "in-graph replication by hand: N towers, gradients averaged on one parameter device"
    worker = "strategies.workers.multi_tower:MultiTowerWorker"
    # an XLA-compiled tower reads only what is on its own device: "Trying to access resource hid_w/0 located in
    # device CPU:0 from device CPU:1" (TensorFlow 2.21, 2 towers)
    xla = False
    xla_refusal = "its towers read the variables on the parameter device, which an XLA-compiled tower on another " \
        "device cannot; mirrored keeps a copy on each tower and compiles them"

    @classmethod
    def sparse_exchange(cls, config: RunConfig) -> SparseExchange:
        return SparseExchange("towers' touched rows concatenated on the parameter device")
