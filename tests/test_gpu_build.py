"""`./run_bench.sh setup --gpu` builds Horovod with NCCL, proven as far as a machine without a GPU allows: in a
fresh clone with an empty cache, setup --gpu installs the CUDA build of TensorFlow and builds Horovod with the
CUDA compiler it finds (here the stand-in: CUDA 13's nvcc, from PyPI's nvidia-cuda-nvcc and its companions,
under the stand-in rule, bench.infra.horovod_build.STANDIN); Horovod's mpi_lib then links libnccl and libcudart,
and, where it imports under that TensorFlow, says it was built with NCCL and CUDA.

Run by `DISTBENCH_TEST_GPU_BUILD=1 .venv/bin/python -m pytest tests/test_gpu_build.py` and skipped without
that variable: it downloads TensorFlow's CUDA packages (about 3 GB) and compiles Horovod's CUDA code."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bench.infra.horovod_build import STANDIN, nvcc_path
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(os.environ.get("DISTBENCH_TEST_GPU_BUILD") != "1",
                                reason="DISTBENCH_TEST_GPU_BUILD=1 runs it (~3 GB of wheels, a CUDA build)")
NO_TENSORFLOW = True
# PyPI's CUDA 13 toolkit: the stand-in for a site's where no nvcc is on PATH or under CUDA_HOME
STANDIN_TOOLKIT = ("nvidia-cuda-nvcc", "nvidia-cuda-runtime", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-cccl")
SETUP_LIMIT_S = 3600  # ~3 GB of wheels and a CUDA build of Horovod on 2 cores


def standin_cuda_home(folder: Path) -> Path:
    """CUDA_HOME made of PyPI's toolkit wheels (their files are under nvidia/cu13)."""
    target = folder / "toolkit"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target",
                    str(target), *STANDIN_TOOLKIT], check=True)
    home = target / "nvidia" / "cu13"
    assert (home / "bin" / "nvcc").is_file(), sorted(p.name for p in home.iterdir())
    return home


@pytest.fixture(scope="module")
def gpu_setup():
    folder = Path(tempfile.mkdtemp(prefix="distbench-gpu-build-", dir="/var/tmp"))
    try:
        clone = folder / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        venv_bin = str(ROOT / ".venv" / "bin")
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
        env.update({"XDG_CACHE_HOME": str(folder / "cache"), STANDIN: "1"})
        if nvcc_path(env) is None:
            env["CUDA_HOME"] = str(standin_cuda_home(folder))
        done = subprocess.run([str(clone / "run_bench.sh"), "setup", "--gpu"], cwd=clone, env=env,
                              capture_output=True, text=True, timeout=SETUP_LIMIT_S)
        yield clone, done
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def mpi_lib(clone: Path) -> Path:
    found = sorted((clone / ".venv").glob("lib/python*/site-packages/horovod/tensorflow/mpi_lib*.so"))
    assert found, "no Horovod TensorFlow extension installed"
    return found[0]


def symbols(library: Path, which: str) -> set[str]:
    listed = subprocess.run(["nm", "-D", which, str(library)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in listed.splitlines() if line.strip()}


def test_setup_gpu_builds_horovod_whose_mpi_lib_links_nccl_and_the_cuda_runtime(gpu_setup):
    clone, done = gpu_setup
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Horovod with NCCL (GPU operations NCCL)" in done.stderr
    needed = subprocess.run(["readelf", "-d", str(mpi_lib(clone))], capture_output=True, text=True,
                            check=True).stdout
    libraries = [line.split("[")[1].rstrip("]") for line in needed.splitlines() if "(NEEDED)" in line]
    assert any(name.startswith("libnccl.so") for name in libraries), libraries
    # the CUDA runtime: its own libcudart, or the cuda* functions TensorFlow's framework library exports (its stubs
    # load TensorFlow's libcudart: one runtime in the process), which gcc's --as-needed then binds instead
    if not any(name.startswith("libcudart.so") for name in libraries):
        used = symbols(mpi_lib(clone), "--undefined-only")
        framework = next((clone / ".venv").glob("lib/python*/site-packages/tensorflow/libtensorflow_framework.so*"))
        runtime = {name for name in used if name.startswith("cuda")}
        assert runtime and runtime <= symbols(framework, "--defined-only"), runtime - symbols(framework,
                                                                                          "--defined-only")
    # the wheel's cache key names the flavour and the CUDA version
    assert list((clone.parent / "cache" / "distbench" / "wheels").glob("*-gpu-nccl-cuda1*-*")), \
        list((clone.parent / "cache" / "distbench" / "wheels").iterdir())


def test_horovod_says_it_was_built_with_nccl_and_cuda_where_it_imports(gpu_setup):
    clone, done = gpu_setup
    assert done.returncode == 0, done.stderr[-4000:]
    probe = ("import json, horovod.tensorflow as hvd; "
             "print(json.dumps({'nccl': bool(hvd.nccl_built()), 'cuda': bool(hvd.cuda_built())}))")
    imported = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-c", probe], capture_output=True, text=True,
                              timeout=300)
    assert imported.returncode == 0, f"Horovod does not import under this TensorFlow: {imported.stderr[-3000:]}"
    built = json.loads(imported.stdout.strip().splitlines()[-1])
    assert built == {"nccl": True, "cuda": True}  # nccl_built() is NCCL's version (23203), cuda_built() True
