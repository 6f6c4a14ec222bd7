"""The columns of summary.csv and of the report's run table: (column, heading, format)."""

from bench.analysis.runs.recovery import RECOVERY_COLUMNS

RUN_COLUMNS = [
    ("run_id", "run", "text"), ("strategy", "strategy", "text"), ("model", "model", "text"),
    ("data", "data", "text"), ("workers", "workers", "int"), ("batch_size", "batch/worker", "int"),
    ("status", "status", "text"), ("throughput_examples_per_s", "examples/s", "rate"),
    ("throughput_ci95_examples_per_s", "± 95% CI", "rate"), ("scaling_efficiency", "scaling eff.", "pct"),
    ("mfu", "MFU", "pct"), ("peak_suspect", "peak suspect", "text"),
    ("step_time_p50_s", "p50 step ms", "ms"), ("step_time_p99_s", "p99 step ms", "ms"),
    ("final_accuracy", "final acc.", "acc"), ("bytes_sent_per_worker_per_step", "sent/worker/step", "bytes"),
    ("collective", "collective", "text"),
]
SUMMARY_COLUMNS = [c for c, *_ in RUN_COLUMNS] + [
    "purpose", "ps", "steps", "sizing_rule", "measured_steps", "ci95_share", "superseded", "budget_s",
    "measure_s_planned",
    "optimizer", "lr", "options", "step_time_p90_s", "best_accuracy",
    "target_accuracy", "time_to_target_s", "steps_to_target", "gradient_bytes_per_step", "sparse_bytes_per_step",
    "sparse_exchange", "table_bytes", "rows_touched_per_step", "row_bytes", "table_dense", "staleness_mean_steps",
    "gradients_dropped", "lost_workers", "scenario", "family", "variant", "straggler", "kill_worker",
    "startup_s", "compute_p50_s", "communication_p50_s", "waiting_p50_s", "other_p50_s", "slowest_worker",
    "slowest_compute_ratio", "waiting_caused_s", "throughput_without_slowest_examples_per_s",
    "model_flops_per_example", "achieved_tflops", "peak_tflops", "exposed_traced_s", "exposed_tensors",
    "exposed_top_share", "exposed_ps_task", "started_at", "host", "cpu_model", "cpu_count",
    "cpu_extensions", "cpu_quota_cores", "suite_commit", "horovod_nccl", "gpu_tensors_via_host",
    "cpu_on_gpu_host", "path"]
# a run's checkpoints (bench.run.process.summary.checkpoint_figures)
CHECKPOINT_FIGURES = ["checkpoints", "checkpoint_save_s_mean", "checkpoint_save_s_max", "checkpoint_bytes",
                      "throughput_between_checkpoints_examples_per_s", "checkpoint_overhead"]
SUMMARY_COLUMNS += CHECKPOINT_FIGURES + ["kill_ps", *RECOVERY_COLUMNS]
# runs on the emulated cluster (bench.infra.emulated) add these
NETWORK_COLUMNS = [
    "link_mbit", "host_cores", "host_cpu_period_s", "net_worker_sent_per_step", "net_worker_predicted_sent_per_step",
    "net_worker_received_per_step", "net_worker_predicted_received_per_step", "net_ps_sent_per_step",
    "net_ps_received_per_step", "net_ps_predicted_received_per_step", "net_ps_link_utilisation",
    "net_worker_link_utilisation"]
