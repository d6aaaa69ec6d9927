#!/usr/bin/env bash
# The GPU checks, as one short script, on a machine with an NVIDIA GPU and CUDA's
# toolkit (nvcc, CUPTI) that scripts/setup.sh has set up:
#   bash scripts/gpu-check.sh [pytest args...]
# Builds PInsight's libpinsight.so with its CUDA domain (-DPINSIGHT_CUDA=ON) into
# build/pinsight-cuda, then runs the tests that need the GPU: a ctypes-launched pair
# of kernels and a small PyTorch model's training steps (skipped without torch), both
# traced as a user runs them (LD_PRELOAD=libpinsight.so pinsight-python trace -- ...).
# LIBRARY_PATH from the caller reaches the build after LLVM's libomp folder, and CPATH,
# LDFLAGS, CMAKE_PREFIX_PATH reach it as CMake takes them: where setup.sh cannot run
# (a lent GPU machine: scripts/gpu-on-device.sh), LTTng-UST and libomp come from a private
# prefix.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
die() { echo "gpu-check: $*" >&2; exit 1; }
command -v nvidia-smi >/dev/null || die "no nvidia-smi: this machine has no NVIDIA GPU driver"
command -v nvcc >/dev/null || die "no nvcc: install CUDA's toolkit (it brings CUPTI)"
[[ -x .venv/bin/python ]] || die ".venv is missing: run bash scripts/setup.sh first"
pinsight_src=${PINSIGHT_SOURCE:-$root/../shared/pinsight}
[[ -f $pinsight_src/CMakeLists.txt ]] || die "PInsight's source is missing at $pinsight_src (set PINSIGHT_SOURCE)"
cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
cmake=$(command -v cmake || echo .venv-sanitize/bin/cmake)
# gcc: clang 14 rejects upstream's src/ompt_callback.c.
# PINSIGHT_OPENMP stays ON: PInsight's core uses global_thread_num, which only its
# OpenMP domain defines (a build without it does not load).
mkdir -p build # a fresh checkout has none
"$cmake" -S "$pinsight_src" -B build/pinsight-cuda -DCMAKE_C_COMPILER=gcc -DPINSIGHT_CUDA=ON \
  -DCUDAToolkit_ROOT="$cuda_home" -DPINSIGHT_MPI=OFF -DPINSIGHT_OPENMP=ON >build/pinsight-cuda.log 2>&1 &&
  LIBRARY_PATH=/usr/lib/llvm-14/lib${LIBRARY_PATH:+:$LIBRARY_PATH} "$cmake" --build build/pinsight-cuda -j >>build/pinsight-cuda.log 2>&1 ||
  die "building libpinsight.so with CUDA failed: see build/pinsight-cuda.log"
lib=$(find build/pinsight-cuda -name libpinsight.so -print -quit)
[[ -n $lib ]] || die "no libpinsight.so under build/pinsight-cuda"
export PINSIGHT_CUDA_LIB=$root/$lib
# The integration tier's libpinsight (tests/tracing.py): the CUDA build where setup.sh's
# plain one is absent (a machine that scripts/gpu-on-device.sh set up).
[[ -n ${PINSIGHT_LIB:-} || -f build/pinsight/libpinsight.so ]] || export PINSIGHT_LIB=$PINSIGHT_CUDA_LIB
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
exec .venv/bin/python -m pytest -p no:cacheprovider tests/integration/test_cuda.py \
  -k "real_cuda or pytorch" "$@"
