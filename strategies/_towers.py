"""What the two in-graph strategies (multi-tower, mirrored) declare alike: one process
feeding the global batch to N towers on N devices of this machine."""

from __future__ import annotations

from bench.config import RunConfig
from bench.errors import UsageError
from bench.options import Option
from bench.run.contract import IN_GRAPH, Strategy

VARIABLE_DEVICE = Option("variable_device", str, "cpu", "multi-tower/mirrored: where variables live (cpu|gpu0)",
                         choices=("cpu", "gpu0"))
TOWER_OPTIONS = (VARIABLE_DEVICE,)


class TowerStrategy(Strategy):
    family = IN_GRAPH
    xla = True  # each tower's gradients: strategies.workers.gradient_step.gradients
    exchange_trace = "not traced per tensor: its towers exchange inside one process (the split's communication)"
    checkpoints = True
    options = TOWER_OPTIONS

    @classmethod
    def validate(cls, config: RunConfig) -> None:
        if config.multi_host:
            raise UsageError(f"--strategy {config.strategy} runs on one machine; drop --worker-hosts/--ps-hosts")

    @classmethod
    def worker_batch(cls, config: RunConfig) -> int:
        return config.batch_size * config.workers

    @classmethod
    def gpus(cls, config: RunConfig) -> dict[str, int]:
        return {"worker": config.workers}  # its towers: the host's GPUs, one a tower

    @classmethod
    def collective(cls, config: RunConfig, role: str, on_gpus: bool) -> str:
        return f"towers' gradients reduced in this process, on {config.option('variable_device')} (the variables')"
