"""How `./run_bench.sh setup --gpu` builds Horovod: with NCCL for its GPU operations where a CUDA compiler of
TensorFlow's CUDA major is found, against the NCCL that TensorFlow's CUDA packages installed (so one libnccl
is loaded in a process), else without and why, in one line. Read by run_bench.sh (build_horovod): it prints
the build's environment as KEY=VALUE lines and says its decision on stderr; `patch TREE` edits Horovod's
source for a GPU build.

Every decision is a function of what it reads (the environment, nvcc's output, the installed TensorFlow's
files), so that the tests decide every case on a machine without a GPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# A build for the stand-in toolkit (CUDA 13's nvcc from PyPI, tests/test_gpu_build.py) sets the rule that nvcc's
# CUDA major must be TensorFlow's aside: two CUDA runtimes in one process are not a setup to ship.
STANDIN = "DISTBENCH_HOROVOD_CUDA_STANDIN"
WHAT_TO_INSTALL = ("install the CUDA toolkit whose major version is TensorFlow's (nvcc on PATH, or CUDA_HOME), then "
                   "./run_bench.sh setup --gpu again")


@dataclass(frozen=True)
class GpuBuild:
    """What the Horovod build is given: NCCL operations or none, and the one line that says so."""

    nccl: bool
    said: str
    cuda: str = ""  # nvcc's CUDA version, for the wheel's cache key
    env: Mapping[str, str] = field(default_factory=dict)

    def key(self) -> str:
        """The wheel cache key's part for this build."""
        return f"gpu-nccl-cuda{self.cuda}" if self.nccl else "gpu-nonccl"


def nvcc_path(env: Mapping[str, str]) -> Path | None:
    """nvcc on PATH, else under CUDA_HOME (or CUDA_PATH)."""
    for folder in env.get("PATH", "").split(os.pathsep):
        if folder and (Path(folder) / "nvcc").is_file():
            return Path(folder) / "nvcc"
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(name) and (Path(env[name]) / "bin" / "nvcc").is_file():
            return Path(env[name]) / "bin" / "nvcc"
    return None


def nvcc_version(text: str) -> str | None:
    """ "13.0" from `nvcc --version` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    found = re.search(r"release (\d+\.\d+)", text)
    return found.group(1) if found else None


def toolkit_root(nvcc: Path, dryrun_text: str) -> Path:
    """The toolkit nvcc belongs to, as nvcc itself says (`nvcc --dryrun`: "#$ TOP=/usr/local/cuda-13.0/bin/.."): a
    wrapper script on PATH (exec /usr/local/cuda-13.0/bin/nvcc) is not where its toolkit is."""
    found = re.search(r"^#\$ TOP=(.+)$", dryrun_text, re.MULTILINE)
    return Path(os.path.normpath(found.group(1).strip())) if found else nvcc.resolve().parent.parent


def architectures(text: str, tensorflow_built_for: list[int]) -> list[int]:
    """The compute capabilities Horovod's kernels are compiled for: those `nvcc --list-gpu-arch` lists ("compute_75
    ..."; CUDA 13's nvcc starts at 75, NVIDIA having removed Maxwell, Pascal and Volta from it; CUDA 12's lists 50
    and up), from the oldest TensorFlow's own wheel was compiled for (its build_info's cuda_compute_capabilities:
    a GPU older than that TensorFlow itself cannot compute on) up; every one nvcc lists where that is unknown."""
    listed = {int(n) for n in re.findall(r"compute_(\d+)", text)}
    oldest = min(tensorflow_built_for, default=0)
    return sorted(n for n in listed if n >= oldest)


def tensorflow_architectures(site: Path) -> list[int]:
    """The compute capabilities the installed TensorFlow was compiled for (its build_info.py's
    cuda_compute_capabilities: 'sm_60', 'compute_90', ...), read, not imported; [] where it does not say."""
    try:
        text = (site / "tensorflow" / "python" / "platform" / "build_info.py").read_text()
    except OSError:
        return []
    found = re.search(r"['\"]cuda_compute_capabilities['\"]\s*[,:]\s*\[([^\]]*)\]", text)
    return sorted({int(n) for n in re.findall(r"(?:sm|compute)_(\d+)", found.group(1))}) if found else []


def tensorflow_cuda(site: Path) -> str | None:
    """The CUDA version the installed TensorFlow was built with (its build_info.py, read, not imported: setup
    must not start CUDA), None for the CPU build."""
    try:
        text = (site / "tensorflow" / "python" / "platform" / "build_info.py").read_text()
    except OSError:
        return None
    # ('is_cuda_build', False), ('cuda_version', '12.5.1') in its OrderedDict
    if re.search(r"['\"]is_cuda_build['\"]\s*[,:]\s*False", text):
        return None
    found = re.search(r"['\"]cuda_version['\"]\s*[,:]\s*['\"](\d+[\d.]*)['\"]", text)
    return found.group(1) if found else None


def nccl_folder(site: Path) -> Path | None:
    """The NCCL that TensorFlow's CUDA packages installed (nvidia-nccl-cuXX: nvidia/nccl/{include,lib})."""
    folder = site / "nvidia" / "nccl"
    return folder if (folder / "include" / "nccl.h").is_file() and any((folder / "lib").glob("libnccl.so*")) \
        else None


def major(version: str | None) -> str | None:
    return version.split(".")[0] if version else None


def decide(env: Mapping[str, str], site: Path, nvcc_text: str, arch_text: str, links: Path,
           dryrun_text: str = "") -> GpuBuild:
    """The GPU build of Horovod: NCCL where nvcc, its CUDA major equal to TensorFlow's (or the stand-in), and
    TensorFlow's NCCL are found; `links` is a folder for the libnccl.so link that CMake's search needs (the
    wheel has only libnccl.so.2)."""
    nvcc = nvcc_path(env)
    if nvcc is None:
        return GpuBuild(False, "no CUDA compiler (nvcc on PATH or under CUDA_HOME): Horovod is built without GPU "
                               "operations, its allreduce of GPU tensors goes through host memory; " + WHAT_TO_INSTALL)
    cuda, tf_cuda = nvcc_version(nvcc_text), tensorflow_cuda(site)
    if cuda is None:
        return GpuBuild(False, f"{nvcc} did not say its CUDA version: Horovod is built without GPU operations")
    standin = env.get(STANDIN) == "1"
    if major(cuda) != major(tf_cuda) and not standin:
        tf_said = f"CUDA {tf_cuda}" if tf_cuda else "no CUDA (its CPU build)"
        return GpuBuild(False, f"nvcc is CUDA {cuda} and TensorFlow was built with {tf_said}: two CUDA runtimes in "
                               "one process are not a setup to ship, so Horovod is built without GPU operations; "
                               + WHAT_TO_INSTALL)
    nccl = nccl_folder(site)
    if nccl is None:
        return GpuBuild(False, f"no NCCL beside TensorFlow ({site / 'nvidia' / 'nccl'}): Horovod is built without "
                               "GPU operations; the CUDA build of TensorFlow (setup --gpu) installs it")
    arches = architectures(arch_text, tensorflow_architectures(site))
    links.mkdir(parents=True, exist_ok=True)
    library = sorted((nccl / "lib").glob("libnccl.so*"))[0]
    link = links / "libnccl.so"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(library)
    build_env = {"HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_CUDA_HOME": str(toolkit_root(nvcc, dryrun_text)),
                 "HOROVOD_NCCL_INCLUDE": str(nccl / "include"), "HOROVOD_NCCL_LIB": str(links),
                 "HOROVOD_NCCL_LINK": "SHARED"}
    if arches:
        build_env["HOROVOD_BUILD_CUDA_CC_LIST"] = ",".join(map(str, arches))
    versus = f"TensorFlow's CUDA {tf_cuda}" if not standin else f"the stand-in rule ({STANDIN}=1; TensorFlow's: " \
        f"{tf_cuda or 'none'})"
    return GpuBuild(True, f"Horovod with NCCL (GPU operations NCCL): nvcc {cuda} ({nvcc}) for {versus}, NCCL from "
                          f"{nccl}, compute capabilities {','.join(map(str, arches)) or 'nvcc default'}", cuda,
                    build_env)


# Horovod 0.28.1's TensorFlow GPU ops call stream_executor::gpu::AsGpuStreamValue, a function TensorFlow no longer
# exports (tensorflow-cpu has none; TF >= 2.16 reads a stream's handle through Stream::platform_specific_handle(),
# a virtual member of xla/stream_executor/stream.h): define it inline, after the stream header, from that member.
STREAM_DECLARATION = "GpuStreamHandle AsGpuStreamValue(Stream* stream);"
STREAM_DEFINITION = """
#if HAVE_GPU
namespace stream_executor {
namespace gpu {
inline GpuStreamHandle AsGpuStreamValue(Stream* stream) {
  return static_cast<GpuStreamHandle>(stream->platform_specific_handle().stream);
}
} // namespace gpu
} // namespace stream_executor
#endif // HAVE_GPU (distbench: AsGpuStreamValue from platform_specific_handle)
"""
STREAM_AFTER = "#endif // HAVE_GPU\n"
# CMake links the CUDA runtime statically by default: a process would then hold TensorFlow's libcudart and
# Horovod's copy. Shared, Horovod's cuda* calls bind to the CUDA runtime functions TensorFlow's framework library
# exports (libtensorflow_framework.so.2 defines cudaGetDevice, cudaSetDevice, ...: its stubs load TensorFlow's
# libcudart), so gcc's default --as-needed records no libcudart of Horovod's own: one runtime in the process.
RUNTIME_STATIC = 'set(CMAKE_CUDA_RUNTIME_LIBRARY "Static")'



def patch(tree: Path) -> list[str]:
    """Edit Horovod's source in `tree` for a GPU build against this TensorFlow; what it changed. A source that no
    longer has the text to edit fails the build here, saying so."""
    ops = tree / "horovod" / "tensorflow" / "mpi_ops.cc"
    text = ops.read_text()
    if STREAM_DECLARATION not in text or STREAM_AFTER not in text:
        raise SystemExit(f"{ops} has no '{STREAM_DECLARATION}' to replace: Horovod's source changed")
    text = text.replace(STREAM_DECLARATION, "inline " + STREAM_DECLARATION, 1)
    at = text.index(STREAM_AFTER, text.index(STREAM_DECLARATION)) + len(STREAM_AFTER)
    ops.write_text(text[:at] + STREAM_DEFINITION + text[at:])
    cmake = tree / "CMakeLists.txt"
    lists = cmake.read_text()
    if RUNTIME_STATIC not in lists:
        raise SystemExit(f"{cmake} has no '{RUNTIME_STATIC}' to change: Horovod's source changed")
    cmake.write_text(lists.replace(RUNTIME_STATIC, RUNTIME_STATIC.replace("Static", "Shared")))
    return [f"{ops.name}: AsGpuStreamValue from Stream::platform_specific_handle()",
            f"{cmake.name}: the CUDA runtime shared"]


def site_packages() -> Path:
    import sysconfig

    return Path(sysconfig.get_paths()["purelib"])


def run_nvcc(nvcc: Path | None, *args: str) -> str:
    if nvcc is None:
        return ""
    try:
        done = subprocess.run([str(nvcc), *args], capture_output=True, text=True, timeout=60)
        return done.stdout + done.stderr
    except (OSError, subprocess.SubprocessError):
        return ""


def main(argv: list[str]) -> int:
    """`decide LINKS`: the build's KEY=VALUE lines on stdout (the first: the cache key's part), the decision on
    stderr. `patch TREE`: edit Horovod's source."""
    if argv[:1] == ["patch"] and len(argv) == 2:
        for line in patch(Path(argv[1])):
            print(f"patched {line}")
        return 0
    if argv[:1] != ["decide"] or len(argv) != 2:
        print("usage: python -m bench.infra.horovod_build decide LINKS | patch TREE", file=sys.stderr)
        return 2
    nvcc = nvcc_path(os.environ)
    build = decide(os.environ, site_packages(), run_nvcc(nvcc, "--version"), run_nvcc(nvcc, "--list-gpu-arch"),
                   Path(argv[1]), run_nvcc(nvcc, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull))
    print(f"KEY={build.key()}")
    for key, value in build.env.items():
        print(f"{key}={value}")
    print(f"[setup] {build.said}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
