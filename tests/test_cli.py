import subprocess
import sys

import pytest

from bench.cli import config_from_args, main
from bench.errors import UsageError
from tests.conftest import ROOT


@pytest.mark.parametrize("argv, fragment", [
    (["--model", "vgg"], "--model"),
    (["--strategy", "nope"], "--strategy"),
    (["--data", "imagenet"], "--data"),
    (["--batch-size", "0"], "--batch-size"),
    (["--steps", "10", "--warmup-steps", "10"], "--warmup-steps"),
    (["--optimizer", "lbfgs"], "--optimizer"),
    (["--lr", "-1"], "--lr"),
    (["--data", "mnist"], "--data-dir"),
    (["--data", "cifar10", "--data-dir", "/nonexistent"], "missing"),
    (["--run-name", "a/b"], "--run-name"),
    (["--teacher-factors", "8"], "only for --data teacher"),
    (["--data", "teacher", "--teacher-examples", "0"], "--teacher-examples"),
    (["--job-name", "chief", "--worker-hosts", "a:1"], "--job-name"),
    (["--worker-hosts", "nohostport"], "host:port"),
    (["--strategy", "single", "--emulated-cluster"], "--emulated-cluster"),
    (["--strategy", "ps-sync", "--workers", "2", "--emulated-cluster", "nosuchcluster"], "emulated cluster"),
])
def test_bad_values_are_one_line_and_exit_2(argv, fragment, capsys, results):
    assert main([*argv, "--output", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err
    assert list(results.iterdir()) == []  # nothing was started


@pytest.mark.parametrize("argv, message", [
    (["up", "--hosts", "1", "--link-mbit", "100"], "bench: error: --hosts: must be in [2, 200], got 1"),
    (["up", "--hosts", "2"], "bench: error: the following arguments are required: --link-mbit (see --help)"),
    (["up", "--hosts", "2", "--link-mbit", "0"], "bench: error: --link-mbit: must be > 0, got 0.0"),
    (["sideways"], "bench: error: argument action: invalid choice: 'sideways'"),
])
def test_bad_cluster_commands_are_one_line_and_exit_2(argv, message, capsys, monkeypatch):
    # values are checked before the machine is: the same message as root or not
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    try:
        code = main(["cluster", *argv, "--name", "dbclitest"])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message), err


def test_the_cluster_off_root_says_it_needs_root(capsys, monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert main(["cluster", "up", "--hosts", "2", "--link-mbit", "100", "--name", "dbclitest"]) == 2
    assert capsys.readouterr().err.strip() == (
        "bench: error: the emulated cluster needs root (network namespaces and tc): run as root")


def test_malformed_flag_exits_2_with_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--steps", "many"])
    assert exc.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_defaults_build_a_valid_config():
    config = config_from_args([])
    assert config.strategy == "single" and config.model == "mlp" and config.data == "digits"


def test_under_mpi_the_default_strategy_is_allreduce(monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    try:
        assert config_from_args([]).strategy == "allreduce"
    except UsageError as exc:  # allreduce needs Horovod; the default was still chosen
        assert "allreduce" in str(exc) or "Horovod" in str(exc)


def test_help_and_real_exit_status():
    ok = subprocess.run([sys.executable, "-m", "bench", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0 and "--strategy" in ok.stdout and "--batch-size" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "bench", "--model", "vgg"], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert [line for line in bad.stderr.splitlines() if line.startswith("bench:")] == [
        "bench: error: --model: unknown model 'vgg'; choose from cnn, embedding, inception3, mlp, resnet101, "
        "resnet152, resnet20, resnet50, vgg16, or name your own as pkg.module:build or path/to/file.py:build "
        "(docs/your-model.md)"]


def test_a_port_in_use_is_one_line_and_exit_2(capsys, results):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["--strategy", "ps-sync", "--ps-hosts", f"127.0.0.1:{port}", "--worker-hosts", "127.0.0.1:1",
                     "--job-name", "ps", "--task-index", "0", "--output", str(results)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"port {port}" in err and "in use" in err
    assert list(results.iterdir()) == []


def test_the_default_comparison_runs_a_strategy_of_several_processes_from_2_workers_and_full_from_1():
    from bench.drivers.presets import matrix

    def counts(argv: list[str]) -> dict[str, set[int]]:
        args, _ = matrix.parser().parse_known_args(argv)
        matrix.validate(args)
        planned = matrix.plan(args.strategies, ["mlp"], args.workers, None, 0, 1,
                              one_process_runs=args.one_process_runs)
        out: dict[str, set[int]] = {}
        for run in planned:
            out.setdefault(run.strategy, set()).add(run.workers)
        return out

    default, full, asked = counts([]), counts(["--full"]), counts(["--workers", "1,2,4"])
    assert default["single"] == {1} and default["multi-tower"] == {1, 2, 4}  # in one process: from 1
    assert default["ps-sync"] == default["allreduce"] == {2, 4}
    assert full["ps-sync"] == full["allreduce"] == asked["allreduce"] == {1, 2, 4}


def test_the_default_comparison_runs_the_baseline_three_times_per_model_spread_among_its_runs():
    from bench.drivers.presets import matrix

    def baseline_positions(repeats: int) -> dict[str, list[int]]:
        planned = matrix.plan(["allreduce", "multi-tower", "ps-sync", "single"], ["mlp", "cnn"], [1, 2, 4],
                              None, 0, repeats, one_process_runs=False)
        out: dict[str, list[int]] = {}
        for i, run in enumerate(planned):
            if run.strategy == "single":
                out.setdefault(run.model, []).append(i)
        return out

    for model, positions in baseline_positions(1).items():
        assert len(positions) == matrix.BASELINE_REPEATS == 3, model
        assert min(b - a for a, b in zip(positions, positions[1:])) >= 2, positions  # other runs between
    assert all(len(p) == 4 for p in baseline_positions(4).values())  # --repeats 4: no extra runs


def test_a_budgeted_comparison_runs_the_answers_convergence_after_the_family_cells_seed_after_seed():
    from bench.drivers.presets import matrix

    args, _ = matrix.parser().parse_known_args(["--budget", "default"])
    matrix.validate(args)
    runs = matrix.plan(args.strategies, ["mlp", "cnn"], args.workers, None, 2500, 1, args.convergence_workers,
                       one_process_runs=False, family_first=True, seeds=matrix.convergence_seeds(args))
    cells = sum(run.first for run in runs)
    assert all(run.first for run in runs[:cells])
    converging = runs[cells:cells + 12]
    assert all(run.purpose == "convergence" for run in converging)
    assert all(run.purpose == "throughput" and not run.first for run in runs[cells + 12:])
    # the card's four and both averaging strategies (the budget keeps the faster), at the family cells' workers
    assert {run.strategy for run in converging} == {"multi-tower", "ps-async", "ps-sync", "allreduce", "local-sgd",
                                                    "local-sgd-ps"}
    assert {run.workers for run in converging} == {4} and [run.seed for run in converging] == [0] * 6 + [1] * 6
    assert {run.strategy for run in runs[:cells] if run.model == "mlp"} >= {"local-sgd", "local-sgd-ps"}
