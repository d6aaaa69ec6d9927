#!/usr/bin/env bash
# One-command set-up on a fresh Debian 12 machine (run as root, from anywhere):
#   bash scripts/setup.sh
# Installs the Debian packages, then creates in the repository root, each with
# pinsight-python and its test dependencies:
#   .venv           newest CPython >= 3.12 (sys.monitoring backend), editable
#   .venv-fallback  CPython 3.11 (PyEval_SetProfile backend), editable
# The editable builds carry the test hooks module (_pinsight_python_testing,
# CMake option PINSIGHT_PYTHON_TESTING), which wheels do not.
#   .venv-sanitize  the .venv interpreter, editable, built with ASan + UBSan (build/sanitize)
#   .venv-py38      CPython 3.8, for the short smoke test of the oldest supported version
#   .venv-3.14      CPython 3.14 and
#   .venv-3.15      CPython 3.15, both Debian sid's, unpacked into a private prefix
#                   (scripts/sid-prefix.sh, /opt/pinsight-cpython/3.1x), editable
# a site install for every user in $PINSIGHT_PYTHON_SITE (default /opt/pinsight-python),
# and Debian sid's LTTng 2.16 and babeltrace2 2.1 in a private prefix
# ($PINSIGHT_LTTNG_PREFIX, default /opt/pinsight-lttng) for scripts/test.sh's stage
# against them (scripts/with-lttng.sh).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

die() { echo "setup: error: $*" >&2; exit 1; }

debian_packages=(
  lttng-tools liblttng-ust-dev liblttng-ctl-dev liburcu-dev libinih-dev
  babeltrace2 libbabeltrace2-dev python3-bt2 libxml2-utils zlib1g-dev
  pkg-config g++ make procps clang-format
  openmpi-bin libopenmpi-dev
  python3-venv python3-dev
  clang libomp-dev
  patchelf
)

# attach needs no debugger on x86-64 (its own injector) nor on CPython 3.14+
# (sys.remote_exec); CPython 3.8-3.13 on other processors go through gdb.
[[ $(uname -m) == x86_64 ]] || debian_packages+=(gdb)

missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  [[ $(id -u) -eq 0 ]] || die "need root to install: ${missing[*]}"
  echo "setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Newest interpreter with the given minimum minor version, from PATH or pyenv.
find_python() {
  local min_minor=$1 max_minor=$2 best="" cand v minor
  local candidates=()
  for minor in $(seq "$max_minor" -1 "$min_minor"); do
    candidates+=("python3.$minor")
    for d in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*; do
      [[ -x "$d/bin/python3.$minor" ]] && candidates+=("$d/bin/python3.$minor")
    done
  done
  for cand in "${candidates[@]}"; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import venv, ensurepip' 2>/dev/null; then
      best=$(command -v "$cand")
      break
    fi
  done
  echo "$best"
}

# make_venv DIR PYTHON PIP-ARGS...
make_venv() {
  local dir=$1 python=$2
  shift 2
  echo "setup: $dir with $("$python" -V 2>&1) ($python)"
  if [[ ! -x "$dir/bin/python" ]] || ! "$dir/bin/python" -c pass 2>/dev/null ||
    [[ $("$dir/bin/python" -c 'import sys; print(sys.version_info[:2])') != $("$python" -c 'import sys; print(sys.version_info[:2])') ]]; then
    rm -rf "$dir"
    "$python" -m venv "$dir"
  fi
  "$dir/bin/python" -m pip install -q --upgrade pip
  "$dir/bin/python" -m pip install -q "$@"
}

py_main=$(find_python 12 13)
[[ -n $py_main ]] || die "no CPython >= 3.12 with venv found on PATH or in pyenv (\$PYENV_ROOT/versions)"
dev_build=(--config-settings=cmake.define.PINSIGHT_PYTHON_TESTING=ON)
make_venv .venv "$py_main" "${dev_build[@]}" -e ".[test]"

# The AddressSanitizer + UndefinedBehaviorSanitizer build (its own build directory),
# built without build isolation as scripts/test.sh rebuilds it, so that its rebuild
# only compiles what changed.
make_venv .venv-sanitize "$py_main" "scikit-build-core>=0.10" "pybind11>=3" cmake ninja
bash scripts/build-sanitized.sh -e ".[test]"

py_fallback=$(find_python 11 11)
[[ -n $py_fallback ]] || die "no CPython 3.11 with venv found on PATH or in pyenv (needed for .venv-fallback)"
make_venv .venv-fallback "$py_fallback" "${dev_build[@]}" -e ".[test]"

py_oldest=$(find_python 8 8)
[[ -n $py_oldest ]] || die "no CPython 3.8 with venv found on PATH or in pyenv (needed for .venv-py38)"
make_venv .venv-py38 "$py_oldest" ".[smoke]"

# CPython 3.14 and 3.15, from Debian sid into a private prefix each (bookworm has
# neither, scripts/sid-prefix.sh): editable like .venv. The venv is made without
# ensurepip (Debian's python3.1x-venv is not unpacked); pip comes from the prefix's
# own wheel.
for sid_version in 3.14 3.15; do
  sid_python=$(bash scripts/sid-prefix.sh "$sid_version" | tail -n 1)
  sid_prefix=${sid_python%/usr/bin/*}
  dir=.venv-$sid_version
  echo "setup: $dir with $("$sid_python" -V 2>&1) ($sid_python)"
  if [[ ! -x $dir/bin/python ]] || ! "$dir/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$dir"
    "$sid_python" -m venv --without-pip "$dir"
    pip_wheel=$(echo "$sid_prefix"/usr/share/python-wheels/pip-*.whl)
    "$dir/bin/python" "$pip_wheel/pip" install -q "$pip_wheel"
  fi
  "$dir/bin/python" -m pip install -q "${dev_build[@]}" -e ".[test]"
done

# LTTng 2.16 and babeltrace2 2.1 from Debian sid into a private prefix (bookworm has
# 2.13 and 2.0): the LTTng 2.16 stage of scripts/test.sh runs .venv-3.14 against them
# beside the machine's LTTng. Its libraries must load in sid's interpreters, whose
# glibc they need (a CPython prefix much older than the LTTng one may lack it: remove
# /opt/pinsight-cpython/3.14 and run setup again).
lttng_prefix=$(bash scripts/sid-prefix.sh lttng "${PINSIGHT_LTTNG_PREFIX:-/opt/pinsight-lttng}" | tail -n 1)
echo "setup: $lttng_prefix (LTTng $("$lttng_prefix/usr/bin/lttng" --version | grep -Eo '[0-9]+\.[0-9]+\.[0-9]+' | head -n 1), Debian sid's)"
(
  # shellcheck source=/dev/null
  source "$lttng_prefix/env.sh" && .venv-3.14/bin/python -c '
import ctypes
for lib in ("liblttng-ust.so.1", "liblttng-ctl.so.0", "libbabeltrace2.so.0"):
    ctypes.CDLL(lib)
from pinsight_python import _pinsight_control, _pinsight_reader
assert _pinsight_control.ctl_release() >= 15 and _pinsight_reader.reads_ctf2()
'
) ||
  die "LTTng 2.16 and babeltrace2 2.1 of $lttng_prefix do not load in .venv-3.14 (see above)"

# A site install every user can run, as an HPC site makes one for everyone: Debian's
# CPython (readable by all, unlike an interpreter in root's home), the package as a
# wheel (no test hooks) in $PINSIGHT_PYTHON_SITE, readable by all. Its own build
# directory: the editable builds' options stay as they are.
site=${PINSIGHT_PYTHON_SITE:-/opt/pinsight-python}
echo "setup: $site (site install, $(/usr/bin/python3 -V 2>&1), for every user)"
if [[ ! -x $site/bin/python ]] || ! "$site/bin/python" -c pass 2>/dev/null; then
  rm -rf "$site"
  /usr/bin/python3 -m venv "$site"
fi
"$site/bin/python" -m pip install -q --upgrade pip
"$site/bin/python" -m pip install -q --config-settings=build-dir=build/site .
chmod -R a+rX "$site"

# PInsight's libpinsight.so, from the source snapshot beside the project (its
# SNAPSHOT.md): the tests trace its real OpenMP and MPI domains beside ours. Built
# with gcc (clang 14 rejects src/ompt_callback.c); OMPT itself comes from LLVM's
# libomp (libomp-dev), which the tests' OpenMP kernels are built against with clang.
pinsight_src=${PINSIGHT_SOURCE:-$root/../shared/pinsight}
[[ -f $pinsight_src/CMakeLists.txt ]] ||
  die "PInsight's source snapshot is missing at $pinsight_src (set PINSIGHT_SOURCE)"
echo "setup: build/pinsight/libpinsight.so from $pinsight_src"
mkdir -p build
# The cmake setup installed into .venv-sanitize: the one a fresh machine is sure to have.
.venv-sanitize/bin/cmake -S "$pinsight_src" -B build/pinsight -DCMAKE_C_COMPILER=gcc -DPINSIGHT_CUDA=OFF \
  -DPINSIGHT_MPI=ON -DPINSIGHT_OPENMP=ON >build/pinsight.log 2>&1 &&
  LIBRARY_PATH=/usr/lib/llvm-14/lib .venv-sanitize/bin/cmake --build build/pinsight -j >>build/pinsight.log 2>&1 ||
  die "building libpinsight.so failed: see build/pinsight.log"

echo "setup: done. Run the tests with: bash scripts/test.sh"
