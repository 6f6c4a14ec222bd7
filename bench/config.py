"""RunConfig: everything one run needs, frozen and validated in one place."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from bench.errors import UsageError

OPTIMIZERS = ("sgd", "momentum", "adam")
SLOTS_PER_VARIABLE = {"sgd": 0, "momentum": 1, "adam": 2}  # optimizer state the size of each variable
DEFAULT_WARMUP_STEPS = 10


def default_warmup(steps: int) -> int:
    """Warm-up when none is asked for: 10 steps, but never more than a fifth of a short run."""
    return max(0, min(DEFAULT_WARMUP_STEPS, steps // 5))


HOST_LISTS = ("ps_hosts", "worker_hosts", "hosts")  # tuples in a config, lists in its JSON


@dataclass(frozen=True)
class RunConfig:
    """One run. Built from flags by bench.cli or directly by code and tests."""

    strategy: str = "single"
    model: str = "mlp"
    data: str = "digits"
    data_dir: str | None = None
    batch_size: int = 64
    steps: int = 300
    # None: default_warmup(steps), resolved when the config is made (run.json records the number used)
    warmup_steps: int | None = None
    workers: int = 1
    ps: int = 1
    optimizer: str = "sgd"
    lr: float = 0.1
    seed: int = 0
    eval_every: int = 50
    target_accuracy: float = 0.9
    output: str = "results"
    run_name: str | None = None
    purpose: str | None = None  # throughput or convergence (bench.run.process.schema); None: from eval_every and data
    shuffle: bool = True
    # the embedding model and its synthetic-ids data (bench.run.models.embedding, bench.run.data.ids)
    # the ImageNet models (bench.run.models.IMAGENET): a smaller square input for CPU runs; None: the
    # model's own (224, or 299 for inception3). Their parameters do not change with it.
    image_size: int | None = None
    embedding_rows: int = 262144
    embedding_width: int = 32
    id_features: int = 8
    zipf_exponent: float = 1.05
    # the teacher task (bench.run.data.teacher): latent factors (its difficulty) and training examples
    teacher_factors: int = 16
    teacher_examples: int = 20000  # validation gets a fifth as many more
    save_weights: bool = False
    # one device's peak FLOP/s in TFLOP/s (a data sheet's); None: this machine's measured by ./run_bench.sh peak
    peak_tflops: float | None = None
    # checkpoints (bench.run.process.checkpoints): every K global steps or every T seconds, the last N kept
    checkpoint_every_steps: int = 0
    checkpoint_every_s: float = 0.0
    checkpoint_keep: int = 3
    # --resume (bench.run.process.resume): the checkpoint this attempt starts from and its global step;
    # set from the run folder, never typed
    resume_from: str | None = None
    resume_step: int = 0
    # --recover (bench.run.launch.recovery): a failed multi-process run is restarted, a dead worker
    # alone when the strategy lets one rejoin, else the whole job from its latest checkpoint
    recover: bool = False
    # set by the launcher for a worker restarted into its running job, never typed
    rejoin: bool = False
    stall_timeout_s: float = 120.0
    # before the first step: process start-up, graph building, joining the cluster (a resnet20 ps
    # cluster on a busy 2-core machine takes about a minute; ResNet-152 several on a loaded one)
    startup_timeout_s: float = 300.0
    # failure injection: "W@S" = worker W kills itself with SIGKILL at its local step S
    kill_worker: str | None = None
    # "P@S": the launcher kills ps task P with SIGKILL once the run has reached global step S
    kill_ps: str | None = None
    # straggler injection: "W:F" = worker W's steps take F times as long; or each step one
    # random worker (the same one on every worker, drawn from the seed) is slowed by F
    straggler: str | None = None
    straggler_random: float | None = None
    # multi-host topology, as in the seed's mnist_replica.py; empty means "launch locally"
    ps_hosts: tuple[str, ...] = ()
    worker_hosts: tuple[str, ...] = ()
    chief_host: str | None = None  # a coordinator's address (ps-coordinator: TF's "chief" task)
    job_name: str | None = None
    task_index: int | None = None
    # name of an emulated cluster (bench.infra.emulated): each process in a network namespace of its own
    emulated_cluster: str | None = None
    # hosts without a scheduler (bench.run.launch.ssh_hosts): each task started on its host over ssh
    hosts: tuple[str, ...] = ()
    # GPUs (bench.run.placement): each host's, where none are found (to plan, or to test the placement
    # on a machine without GPUs); None: the GPUs the host has
    gpus_per_host: int | None = None
    gpus_per_worker: int = 1  # GPUs each worker process drives, as towers when more than one
    gpus_per_ps: int = 0  # GPUs each ps task sees (the seed's ps tasks compute nothing: none)
    share_gpus: bool = False  # more GPU processes on a host than its GPUs: shared, each with a memory limit
    on_cpu: bool = False  # a CPU run on a GPU host: processes placed as planned, TensorFlow shown no GPU, and said
    # the seed's per_process_gpu_memory_fraction; None: memory growth (the seed's allow_growth)
    gpu_memory_fraction: float | None = None
    # the precision of the forward and backward passes (bench.run.models.precision) and XLA for them
    precision: str = "float32"
    xla: bool = False
    # options declared by the chosen strategy (see bench.run.contract.Strategy.options)
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.warmup_steps is None:
            object.__setattr__(self, "warmup_steps", default_warmup(self.steps))
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))  # read-only

    def option(self, name: str) -> Any:
        return self.options[name]

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["options"] = dict(self.options)
        for name in HOST_LISTS:
            out[name] = list(out[name])
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RunConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in values.items() if k in known}
        for name in HOST_LISTS:
            kwargs[name] = tuple(kwargs.get(name) or ())
        return cls(**kwargs)

    @property
    def multi_host(self) -> bool:
        return bool(self.worker_hosts)

    def slowdown(self, rank: int, local_step: int) -> float:
        """How many times its normal length this worker's step `local_step` should take."""
        if self.straggler:
            worker, factor = parse_straggler(self.straggler)
            return factor if worker == rank else 1.0
        if self.straggler_random:
            import numpy as np

            chosen = np.random.default_rng((self.seed, local_step)).integers(self.workers)
            return self.straggler_random if chosen == rank else 1.0
        return 1.0

    @property
    def checkpointing(self) -> bool:
        """Whether the chief saves checkpoints (--checkpoint-every-steps or --checkpoint-every-s)."""
        return bool(self.checkpoint_every_steps or self.checkpoint_every_s)

    @property
    def kill_plan(self) -> tuple[int, int] | None:
        """(worker, local step) of the injected SIGKILL, if any."""
        return parse_kill(self.kill_worker)

    @property
    def kill_ps_plan(self) -> tuple[int, int] | None:
        """(ps task, global step) of the injected SIGKILL of a ps task, if any."""
        return parse_kill(self.kill_ps, "--kill-ps", "ps task P dies at global step S")


def check_output(output: str) -> None:
    """The results folder exists or can be made, and a file can be written in it."""
    path = Path(output)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UsageError(f"--output {output}: cannot write there ({reason})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--output {output}: cannot write there (permission denied)")


def check_numbers(config: RunConfig) -> None:
    positive_ints = {"--batch-size": config.batch_size, "--steps": config.steps,
                     "--workers": config.workers}
    for flag, value in positive_ints.items():
        if value < 1:
            raise UsageError(f"{flag}: must be >= 1, got {value}")
    if config.warmup_steps < 0 or config.warmup_steps >= config.steps:
        raise UsageError(f"--warmup-steps: must be in [0, --steps), got {config.warmup_steps}")
    if config.ps < 0:
        raise UsageError(f"--ps: must be >= 0, got {config.ps}")
    if not config.lr > 0:
        raise UsageError(f"--lr: must be > 0, got {config.lr}")
    if config.eval_every < 0:
        raise UsageError(f"--eval-every: must be >= 0 (0: only at the end), got {config.eval_every}")
    if not 0 < config.target_accuracy <= 1:
        raise UsageError(f"--target-accuracy: must be in (0, 1], got {config.target_accuracy}")
    for flag, value in (("--embedding-rows", config.embedding_rows), ("--embedding-width", config.embedding_width),
                        ("--id-features", config.id_features), ("--teacher-factors", config.teacher_factors),
                        ("--teacher-examples", config.teacher_examples)):
        if value < 1:
            raise UsageError(f"{flag}: must be >= 1, got {value}")
    if not config.zipf_exponent > 0:
        raise UsageError(f"--zipf-exponent: must be > 0, got {config.zipf_exponent}")
    if config.peak_tflops is not None and not config.peak_tflops > 0:
        raise UsageError(f"--peak-tflops: must be > 0, got {config.peak_tflops}")
    if config.checkpoint_every_steps < 0 or config.checkpoint_every_s < 0:
        raise UsageError("--checkpoint-every-steps/--checkpoint-every-s: must be >= 0 (0: no checkpoints)")
    if config.checkpoint_every_steps and config.checkpoint_every_s:
        raise UsageError("--checkpoint-every-steps and --checkpoint-every-s: choose one")
    if config.checkpoint_keep < 1:
        raise UsageError(f"--checkpoint-keep: must be >= 1, got {config.checkpoint_keep}")
    if config.run_name is not None and not config.run_name.replace("-", "").replace("_", "").isalnum():
        raise UsageError(f"--run-name: use letters, digits, '-' and '_' only, got {config.run_name!r}")


def check_topology(config: RunConfig) -> None:
    chief = (config.chief_host,) if config.chief_host else ()
    for flag, hosts in (("--ps-hosts", config.ps_hosts), ("--worker-hosts", config.worker_hosts),
                        ("--chief-host", chief)):
        for host in hosts:
            name, _, port = host.rpartition(":")
            if not name or not port.isdigit() or not 0 < int(port) < 65536:
                raise UsageError(f"{flag}: {host!r} is not host:port")
    if config.emulated_cluster is not None and (config.worker_hosts or config.job_name):
        raise UsageError("--emulated-cluster places the processes itself: drop --worker-hosts/--job-name/TF_CONFIG")
    if config.hosts and (config.worker_hosts or config.job_name or config.emulated_cluster is not None):
        raise UsageError("--hosts places the processes itself: drop --worker-hosts/--job-name/--emulated-cluster")
    if any(not h or ":" in h or "," in h or h.startswith("-") for h in config.hosts):
        raise UsageError(f"--hosts: give host names or addresses without ports, comma-separated, got "
                         f"{','.join(config.hosts)!r}")
    if config.job_name is None:
        return
    if config.job_name not in ("ps", "worker", "chief"):
        raise UsageError(f"--job-name: must be ps, worker or chief, got {config.job_name!r}")
    if not config.worker_hosts:
        raise UsageError("--job-name needs --worker-hosts (and --ps-hosts for ps strategies)")
    if config.job_name == "chief" and not config.chief_host:
        raise UsageError("--job-name chief needs --chief-host (the coordinator's host:port)")
    hosts = {"ps": config.ps_hosts, "worker": config.worker_hosts, "chief": chief}[config.job_name]
    if config.task_index is None or not 0 <= config.task_index < len(hosts):
        raise UsageError(f"--task-index: must be in [0, {len(hosts)}) for --job-name {config.job_name}")


def check_injection(config: RunConfig) -> None:
    if config.stall_timeout_s <= 0:
        raise UsageError(f"--stall-timeout-s: must be > 0, got {config.stall_timeout_s}")
    if config.startup_timeout_s <= 0:
        raise UsageError(f"--startup-timeout-s: must be > 0, got {config.startup_timeout_s}")
    straggler = parse_straggler(config.straggler)
    if straggler and straggler[0] >= config.workers:
        raise UsageError(f"--straggler: worker {straggler[0]} does not exist with --workers {config.workers}")
    if config.straggler_random is not None and config.straggler_random < 1:
        raise UsageError(f"--straggler-random: the factor must be >= 1, got {config.straggler_random}")
    if config.straggler and config.straggler_random:
        raise UsageError("--straggler and --straggler-random: choose one")
    kill = parse_kill(config.kill_worker)
    if kill and kill[0] >= config.workers:
        raise UsageError(f"--kill-worker: worker {kill[0]} does not exist with --workers {config.workers}")


def parse_straggler(text: str | None) -> tuple[int, float] | None:
    """--straggler "W:F": (worker W, factor F >= 1)."""
    if text is None:
        return None
    worker, sep, factor = text.partition(":")
    try:
        parsed = (int(worker), float(factor)) if sep and worker.isdigit() else None
    except ValueError:
        parsed = None
    if parsed is None or not parsed[1] >= 1:
        raise UsageError(f"--straggler: expected W:F with F >= 1 (worker W is F times slower), got {text!r}")
    return parsed


def parse_kill(text: str | None, flag: str = "--kill-worker",
               meaning: str = "worker W dies at its step S") -> tuple[int, int] | None:
    """--kill-worker "W@S": (worker W, its local step S); --kill-ps "P@S": (ps task P, global step S)."""
    if text is None:
        return None
    who, sep, step = text.partition("@")
    if not sep or not who.isdigit() or not step.isdigit():
        pattern = flag.removeprefix("--kill-")[0].upper()
        raise UsageError(f"{flag}: expected {pattern}@S ({meaning}), got {text!r}")
    return int(who), int(step)
