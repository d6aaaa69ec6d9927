#!/usr/bin/env bash
# The GPU checks on a GPU machine that scripts/setup.sh cannot set up (no package
# registry, no LTTng: this workplace's lent machines), from the .gpu/ that
# scripts/gpu-bundle.sh packed on a set-up machine:
#   bash scripts/gpu-on-device.sh [pytest args...]
#   bash scripts/gpu-on-device.sh -- COMMAND...   (another command in the same setting:
#                                                  .venv/bin/python bench/bench_torch.py)
# It puts .gpu/prefix's LTTng, babeltrace2 and libraries first on the paths, makes .venv
# from the machine's python3 (GPU_PYTHON) with that interpreter's packages (PyTorch,
# pytest) in view and this package's wheel installed, then runs scripts/gpu-check.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
die() { echo "gpu-on-device: $*" >&2; exit 1; }

prefix=$root/.gpu/prefix
[[ -d $prefix ]] || die "no .gpu/prefix: run bash scripts/gpu-bundle.sh on a set-up machine and bring .gpu/ along"
python=${GPU_PYTHON:-python3}
export PATH=$prefix/bin:$PATH
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Where lttng-sessiond and babeltrace2 look by default is under /usr, not here.
export LTTNG_CONSUMERD64_BIN=$prefix/libexec/lttng-consumerd LTTNG_CONSUMERD64_LIBDIR=$prefix/lib
export BABELTRACE_PLUGIN_PATH=$prefix/lib/babeltrace2/plugins
export LTTNG_SESSION_CONFIG_XSD_PATH=$prefix/share/xml/lttng
# libpinsight's build: LTTng-UST's and liburcu's headers, -llttng-ust and -lomp.
export CPATH=$prefix/include${CPATH:+:$CPATH}
export LIBRARY_PATH=$prefix/lib${LIBRARY_PATH:+:$LIBRARY_PATH}

if [[ ! -x .venv/bin/python ]]; then
  # A venv made from a venv's python3 starts from the base interpreter: a .pth file
  # puts the machine's own site-packages (PyTorch, pytest) back in view.
  "$python" -m venv --without-pip .venv
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$python" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith("-packages")))' \
    >"$site/gpu-machine-packages.pth"
  "$python" -m pip install -q --no-index --no-deps --no-compile --target "$site" .gpu/wheels/*.whl ||
    die "installing .gpu/wheels failed: was it built for this machine's $("$python" -V)? (GPU_PYTHON in gpu-bundle.sh)"
fi
.venv/bin/python -c 'import pinsight_python, pytest' || die ".venv cannot import pinsight_python and pytest"
if [[ ${1:-} == -- ]]; then
  shift
  exec "$@"
fi
PINSIGHT_SOURCE=$root/.gpu/pinsight exec bash scripts/gpu-check.sh "$@"
