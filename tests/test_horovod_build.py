"""How setup --gpu builds Horovod (bench.infra.horovod_build), every case decided without a GPU: no CUDA
compiler, nvcc of another CUDA major than TensorFlow's (and the stand-in rule), no NCCL beside TensorFlow,
and the NCCL build's environment; the edits of Horovod's source for a GPU build."""

from pathlib import Path

import pytest

from bench.infra import horovod_build as hb

NO_TENSORFLOW = True
NVCC_13 = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
ARCHES_13 = "compute_75\ncompute_80\ncompute_86\ncompute_90\ncompute_100\ncompute_120\n"
CUDA_BUILD = ("build_info = collections.OrderedDict([('cuda_compute_capabilities', ['sm_60']), "
              "('cuda_version', '12.5.1'), ('cudnn_version', '9'), ('is_cuda_build', True)])")
CPU_BUILD = "build_info = collections.OrderedDict([('is_cuda_build', False), ('is_rocm_build', False)])"


def site(tmp_path: Path, build: str = CUDA_BUILD, nccl: bool = True) -> Path:
    root = tmp_path / "site"
    info = root / "tensorflow" / "python" / "platform" / "build_info.py"
    info.parent.mkdir(parents=True)
    info.write_text(build)
    if nccl:
        (root / "nvidia" / "nccl" / "include").mkdir(parents=True)
        (root / "nvidia" / "nccl" / "include" / "nccl.h").write_text("")
        (root / "nvidia" / "nccl" / "lib").mkdir()
        (root / "nvidia" / "nccl" / "lib" / "libnccl.so.2").write_text("")
    return root


def toolkit(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "nvcc").write_text("#!/bin/sh\n")
    return {"PATH": "/usr/bin", "CUDA_HOME": str(home)}


def test_without_a_cuda_compiler_horovod_is_built_without_gpu_operations_and_says_what_to_install(tmp_path):
    build = hb.decide({"PATH": str(tmp_path)}, site(tmp_path), "", "", tmp_path / "links")
    assert not build.nccl and build.key() == "gpu-nonccl" and not build.env
    assert build.said.startswith("no CUDA compiler (nvcc on PATH or under CUDA_HOME)") and "install" in build.said


def test_nvcc_of_another_cuda_major_than_tensorflows_builds_without_nccl_unless_the_stand_in_rule(tmp_path):
    env = toolkit(tmp_path)
    build = hb.decide(env, site(tmp_path), NVCC_13, ARCHES_13, tmp_path / "links")
    assert not build.nccl and "nvcc is CUDA 13.0 and TensorFlow was built with CUDA 12.5.1" in build.said
    assert "two CUDA runtimes in one process" in build.said
    standin = hb.decide({**env, hb.STANDIN: "1"}, site(tmp_path / "b"), NVCC_13, ARCHES_13, tmp_path / "links")
    assert standin.nccl and standin.key() == "gpu-nccl-cuda13.0" and "stand-in rule" in standin.said


def test_the_nccl_build_uses_tensorflows_nccl_and_compiles_from_the_oldest_gpu_tensorflow_was_built_for(tmp_path):
    env = toolkit(tmp_path)
    nvcc_12 = NVCC_13.replace("13.0", "12.6")
    tf_site = site(tmp_path)
    build = hb.decide(env, tf_site, nvcc_12, "compute_50\ncompute_70\n" + ARCHES_13, tmp_path / "links")
    assert build.nccl and build.cuda == "12.6"
    assert build.env["HOROVOD_GPU_OPERATIONS"] == "NCCL" and build.env["HOROVOD_NCCL_LINK"] == "SHARED"
    assert build.env["HOROVOD_NCCL_INCLUDE"] == str(tf_site / "nvidia" / "nccl" / "include")
    # TensorFlow's wheel here was built for sm_60 up: a CUDA 12 nvcc's sm_70 (V100) is kept, its sm_50 is not
    assert build.env["HOROVOD_BUILD_CUDA_CC_LIST"] == "70,75,80,86,90,100,120"
    newer = hb.decide(env, site(tmp_path / "c", CUDA_BUILD.replace("['sm_60']", "['sm_80', 'compute_90']")), nvcc_12,
                      "compute_50\ncompute_70\n" + ARCHES_13, tmp_path / "links")
    assert newer.env["HOROVOD_BUILD_CUDA_CC_LIST"] == "80,86,90,100,120"
    assert build.env["HOROVOD_CUDA_HOME"] == str((tmp_path / "cuda").resolve())
    # a wrapper on PATH: the toolkit is where nvcc says it is
    said = hb.decide(env, tf_site, nvcc_12, ARCHES_13, tmp_path / "links", "#$ _HERE_=/opt/cuda-12.6/bin\n"
                     "#$ TOP=/opt/cuda-12.6/bin/..\n")
    assert said.env["HOROVOD_CUDA_HOME"] == "/opt/cuda-12.6"
    link = Path(build.env["HOROVOD_NCCL_LIB"]) / "libnccl.so"
    assert link.resolve() == (tf_site / "nvidia" / "nccl" / "lib" / "libnccl.so.2").resolve()


def test_the_cpu_build_of_tensorflow_or_no_nccl_beside_it_builds_without(tmp_path):
    env = toolkit(tmp_path)
    cpu = hb.decide(env, site(tmp_path, CPU_BUILD), NVCC_13, ARCHES_13, tmp_path / "links")
    assert not cpu.nccl and "no CUDA (its CPU build)" in cpu.said
    no_nccl = hb.decide({**env, hb.STANDIN: "1"}, site(tmp_path / "b", nccl=False), NVCC_13, ARCHES_13,
                        tmp_path / "links")
    assert not no_nccl.nccl and no_nccl.said.startswith("no NCCL beside TensorFlow")
    assert hb.tensorflow_cuda(site(tmp_path / "c")) == "12.5.1"


def test_the_gpu_patch_defines_the_stream_handle_after_the_stream_header_and_shares_the_cuda_runtime(tmp_path):
    ops = tmp_path / "horovod" / "tensorflow" / "mpi_ops.cc"
    ops.parent.mkdir(parents=True)
    ops.write_text("namespace stream_executor {\nnamespace gpu {\n" + hb.STREAM_DECLARATION + "\n}\n}\n"
                   '#include "tensorflow/compiler/xla/stream_executor/stream.h"\n' + hb.STREAM_AFTER + "int x;\n")
    (tmp_path / "CMakeLists.txt").write_text(f"    {hb.RUNTIME_STATIC}  # Set to\n")
    hb.patch(tmp_path)
    text = ops.read_text()
    assert "inline " + hb.STREAM_DECLARATION in text
    assert text.index("platform_specific_handle()") > text.index("stream.h")
    assert 'set(CMAKE_CUDA_RUNTIME_LIBRARY "Shared")' in (tmp_path / "CMakeLists.txt").read_text()
    with pytest.raises(SystemExit, match="Horovod's source changed"):
        hb.patch(tmp_path)  # already edited: its text is no longer there
