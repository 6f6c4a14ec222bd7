"""What a process pays before it trains: the processes that only start others, read files or
drive `ip` never import TensorFlow, and those that train import it without Keras, and without
pandas (the launcher that closes the run reads the records with it)."""

import os
import subprocess
import sys

from tests.conftest import ROOT
from tests.processes import RUN_LIMIT_S


def in_fresh_interpreter(code: str, *args: str) -> None:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=RUN_LIMIT_S)  # an interpreter importing the suite's modules
    assert done.returncode == 0, done.stderr[-2000:]


def test_report_cluster_status_and_launchers_do_not_import_tensorflow(tmp_path):
    # a launcher that only starts processes asks its strategy what it is, never imports TensorFlow
    code = ("import sys; from bench.cli import main, config_from_args; main(['report', sys.argv[1]]); "
            "main(['cluster', 'status', '--name', 'dbnotf']); "
            "from strategies import registry; "
            "import bench.run.launch.cluster, bench.run.launch.mpi, bench.run.launch.launcher; "
            "[registry.get(c.strategy).processes(c) for c in (config_from_args(['--strategy', s, '--workers', '2']) "
            "for s in ('ps-sync', 'ps-async', 'allreduce', 'allreduce-tf'))]; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'")
    in_fresh_interpreter(code, str(tmp_path))


def test_a_training_process_imports_tensorflow_without_keras_and_keras_still_works():
    in_fresh_interpreter(
        "import sys; from bench.run.quiet_tf import import_tensorflow_quietly; import_tensorflow_quietly(); "
        "assert 'tensorflow' in sys.modules and 'keras' not in sys.modules, 'keras was imported'; "
        "assert 'keras.src.optimizers' not in sys.modules, 'the hidden module was left hidden'; "
        "import tensorflow as tf; assert tf.keras.optimizers.SGD(0.1).learning_rate == 0.1")


def test_the_modules_a_training_process_imports_bring_in_no_pandas():
    # what a ps task, worker or rank imports: every strategy's worker, the launchers' entries and the
    # harness, after TensorFlow and Horovod as they import them (0.14 CPU-s a process when pandas came too)
    in_fresh_interpreter(
        "import importlib, pkgutil, sys; from bench.run.quiet_tf import import_horovod_without_keras; "
        "import_horovod_without_keras(); "
        "import bench.cli, bench.run.launch.launcher, bench.run.launch.cluster, bench.run.launch.mpi; "
        "import bench.run.launch.worker_process, bench.run.process.process, strategies.workers; "
        "workers = strategies.workers.__path__; "
        "[importlib.import_module(f'strategies.workers.{m.name}') for m in pkgutil.iter_modules(workers)]; "
        "assert 'pandas' not in sys.modules, 'pandas was imported'")


def test_a_runs_summary_and_its_interval_bring_in_no_scipy():
    # every run's launcher (and `single`, which trains in it) closes the run with the summary and its
    # 95% interval: scipy.special's import cost 0.3 CPU-s of each
    in_fresh_interpreter(
        "import sys, numpy as np; import bench.run.process.summary; from bench.metrics import ratio_and_ci95; "
        "ratio_and_ci95(np.array([64.0, 64.0, 64.0]), np.array([0.1, 0.12, 0.11])); "
        "assert 'scipy' not in sys.modules, 'scipy was imported'")


def test_mpiruns_version_is_asked_once_per_process(monkeypatch):
    # the launcher's command, run.json's environment and the profile's software each read it
    import bench.infra.tools as tools
    from bench.drivers.profile.run import software
    from bench.run.launch.mpi_launchers import mpirun_command
    from bench.run.process.environment import mpi_version

    asked = []
    real = tools.subprocess.run
    monkeypatch.setattr(tools.subprocess, "run", lambda argv, **kw: asked.append(argv) or real(argv, **kw))
    tools.mpirun_version.cache_clear()
    mpirun_command(2), mpi_version(), software(), mpirun_command(4)
    assert len([argv for argv in asked if "--version" in argv]) == 1, asked


def test_a_run_that_ends_by_os_exit_leaves_no_autograph_module_behind(tmp_path):
    # AutoGraph writes each function it converts to a temp file and removes it at exit through
    # atexit, which os._exit (how a training process ends: bench/run/process/leave.py) skips
    temp = tmp_path / "tmp"
    temp.mkdir()
    model = str(ROOT / "examples" / "wide_deep.py") + ":build"  # a Keras model: traced with AutoGraph
    done = subprocess.run([sys.executable, "-m", "bench", "--strategy", "single", "--model", model, "--steps", "2",
                           "--warmup-steps", "0", "--output", str(tmp_path / "results")], cwd=ROOT,
                          capture_output=True, text=True, timeout=RUN_LIMIT_S, env={**os.environ, "TMPDIR": str(temp)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert not list(temp.glob("__autograph_generated_file*")), list(temp.iterdir())
