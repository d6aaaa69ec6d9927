#!/usr/bin/env bash
# Packs what the GPU checks need into .gpu/, for a GPU machine that has CUDA, PyTorch and
# a compiler but no package registry and no LTTng (this workplace's lent machines):
#   bash scripts/gpu-bundle.sh            # here, after scripts/setup.sh
#   bash scripts/gpu-on-device.sh         # there, with .gpu/ in the checkout
# .gpu/ holds (ignored by git, about 50 MiB):
#   prefix/  this machine's LTTng (lttng, lttng-sessiond, lttng-relayd, lttng-consumerd and
#            the session schema), babeltrace2 and its plugins, LLVM's libomp, the
#            libraries they and this package load that a CUDA image lacks, and the headers
#            libpinsight builds against (LTTng-UST, liburcu)
#   wheels/  this package, built for the GPU machine's Python (GPU_PYTHON, default
#            CPython 3.12, the version of the PyTorch image's python3)
#   pinsight/ PInsight's source (../shared/pinsight, which does not travel)
# Debian 12's binaries run there unchanged: that machine's glibc is newer.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
die() { echo "gpu-bundle: $*" >&2; exit 1; }

# pyenv's shims answer for every version but run only the selected one: try each.
gpu_python=${GPU_PYTHON:-}
if [[ -z $gpu_python ]]; then
  for candidate in "$HOME"/.pyenv/versions/3.12*/bin/python3.12 "$(command -v python3.12)"; do
    if [[ -x $candidate ]] && "$candidate" -c '' 2>/dev/null; then gpu_python=$candidate; break; fi
  done
fi
[[ -n $gpu_python ]] || die "no CPython 3.12 here: set GPU_PYTHON to an interpreter of the GPU machine's Python version"
pinsight_src=${PINSIGHT_SOURCE:-$root/../shared/pinsight}
[[ -f $pinsight_src/CMakeLists.txt ]] || die "PInsight's source is missing at $pinsight_src (set PINSIGHT_SOURCE)"
multiarch=/usr/lib/x86_64-linux-gnu
tools=(/usr/bin/lttng /usr/bin/lttng-sessiond /usr/bin/lttng-relayd /usr/bin/babeltrace2)
consumerd=$multiarch/lttng/libexec/lttng-consumerd
executables=("${tools[@]}" "$consumerd")
for f in "${executables[@]}" "$multiarch/liblttng-ust.so.1" /usr/lib/llvm-14/lib/libomp.so.5; do
  [[ -e $f ]] || die "$f is missing: run scripts/setup.sh first"
done

out=$root/.gpu
rm -rf "$out"
mkdir -p "$out"/prefix/{bin,libexec,lib/babeltrace2/plugins,include} "$out"/wheels
cp "${tools[@]}" "$out/prefix/bin/"
cp "$consumerd" "$out/prefix/libexec/"
cp "$multiarch"/babeltrace2/plugins/*.so "$out/prefix/lib/babeltrace2/plugins/"

# The wheel first: its extensions' libraries join the closure below.
wheel_venv=$(mktemp -d)
trap 'rm -rf "$wheel_venv"' EXIT
"$gpu_python" -m venv "$wheel_venv/venv"
"$wheel_venv/venv/bin/pip" wheel -q --no-deps -w "$out/wheels" . \
  --config-settings=build-dir="$root/build/gpu-wheel" || die "building the wheel failed"
(cd "$wheel_venv" && unzip -q "$out"/wheels/*.whl -d unpacked)

# Every shared library these load, but the C and C++ runtimes and the few libraries a
# Python image always has (a second copy of those would be loaded into torch too).
keep_system='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libz|liblzma|libzstd|libcrypto|libssl)\.'
mapfile -t elves < <(printf '%s\n' "${executables[@]}" "$multiarch"/babeltrace2/plugins/*.so \
  "$multiarch"/liblttng-ust*.so.1 /usr/lib/llvm-14/lib/libomp.so.5 && find "$wheel_venv/unpacked" -name '*.so')
ldd "${elves[@]}" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r soname path; do
    [[ $soname =~ $keep_system ]] || cp -L "$path" "$out/prefix/lib/$soname"
  done
# Those libraries themselves, which ldd does not list: LTTng-UST's (some are loaded by
# name at run time, not linked) and libomp.
for f in "$multiarch"/liblttng-ust*.so.1 /usr/lib/llvm-14/lib/libomp.so.5; do
  cp -L "$f" "$out/prefix/lib/"
done
# Link-time names for libpinsight's build (-llttng-ust -lomp) and the headers it includes.
for soname in liblttng-ust.so.1 liblttng-ust-common.so.1 liblttng-ust-tracepoint.so.1 \
  liburcu.so.8 liburcu-cds.so.8 libomp.so.5; do
  [[ -e $out/prefix/lib/$soname ]] || cp -L "$multiarch/$soname" "$out/prefix/lib/" 2>/dev/null ||
    die "$soname is missing"
  ln -sf "$soname" "$out/prefix/lib/${soname%%.so*}.so"
done
cp -r /usr/include/x86_64-linux-gnu/{lttng,urcu} /usr/include/x86_64-linux-gnu/urcu*.h "$out/prefix/include/"
# lttng-sessiond refuses to start without the session schema (LTTNG_SESSION_CONFIG_XSD_PATH).
mkdir -p "$out/prefix/share/xml/lttng"
cp /usr/share/xml/lttng/session.xsd "$out/prefix/share/xml/lttng/"

mkdir -p "$out/pinsight"
cp -r "$pinsight_src"/{CMakeLists.txt,LICENSE,src,test} "$out/pinsight/"
echo "gpu-bundle: $(du -sh "$out" | cut -f1) in $out; on the GPU machine: bash scripts/gpu-on-device.sh"
