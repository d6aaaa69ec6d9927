#!/usr/bin/env bash
# CPython 3.14 / 3.15 for this Debian 12 machine, from Debian unstable ("sid"):
#   bash scripts/sid-cpython.sh 3.14 [PREFIX]
# Bookworm has no package of these versions. Sid's binary packages are built
# against a newer glibc, so they are unpacked, with sid's libc6 and the
# libraries they need, into a private prefix (default /opt/pinsight-cpython/3.14),
# and the interpreter is pointed at that prefix's loader and libraries. Nothing
# is installed into /, and the machine's apt sources stay as they are: apt runs
# with a configuration of its own. Idempotent: a prefix whose interpreter runs is
# kept. Prints the interpreter's path on the last line.
set -euo pipefail

version=${1:?usage: sid-cpython.sh 3.14|3.15 [PREFIX]}
prefix=${2:-/opt/pinsight-cpython/$version}
python=$prefix/usr/bin/python$version
# The Debian mirror this machine's own apt sources name (its main archive, not the
# security one); PINSIGHT_DEBIAN_MIRROR overrides it.
machine_mirror() {
  local sources
  sources=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true)
  grep -Eo '(URIs:[[:space:]]*|^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)[a-z]+://[^[:space:]]+' <<<"$sources" |
    grep -Eo '[a-z]+://[^[:space:]]+' | grep -v -- '-security' | head -n 1 || true
}
mirror=${PINSIGHT_DEBIAN_MIRROR:-$(machine_mirror)}

die() { echo "sid-cpython: error: $*" >&2; exit 1; }

# Debian's <python3.x/pyconfig.h> only includes <x86_64-linux-gnu/python3.x/pyconfig.h>,
# which a compiler finds under /usr/include, not under the prefix: the prefix holds
# one architecture, so its own file takes the wrapper's place, and anything built
# against sysconfig's include directory (pip, the tests' extensions) finds it.
own_pyconfig() {
  local include=$prefix/usr/include
  local arch_h=$include/$(uname -m)-linux-gnu/python$version/pyconfig.h
  [[ -f $arch_h ]] && ! cmp -s "$arch_h" "$include/python$version/pyconfig.h" &&
    cp "$arch_h" "$include/python$version/pyconfig.h"
  return 0
}

if [[ -x $python ]] && "$python" -c 'import venv, ssl, sqlite3, ctypes' 2>/dev/null; then
  own_pyconfig
  echo "$python"
  exit 0
fi
[[ $(id -u) -eq 0 ]] || die "need root to write $prefix"
command -v patchelf >/dev/null || die "patchelf is missing (apt-get install patchelf)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/debs"
[[ -n $mirror ]] || die "no Debian mirror named in /etc/apt/sources.list(.d): set PINSIGHT_DEBIAN_MIRROR"
printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s sid main\n' "$mirror" >"$work/sources.list"
apt_opts=(-q -oDir::Etc::SourceList="$work/sources.list" -oDir::Etc::SourceParts=/dev/null
  -oDir::State::Lists="$work/lists" -oAPT::Sandbox::User=root)
echo "sid-cpython: fetching CPython $version from Debian sid into $prefix" >&2
apt-get "${apt_opts[@]}" update >&2
packages=(python$version python$version-minimal libpython$version-minimal libpython$version-stdlib
  libpython$version-dev python$version-dev libpython$version libpython$version-testsuite
  python3-pip-whl python3-setuptools-whl
  libc6 libssl3t64 libexpat1 libffi8 libsqlite3-0 libzstd1 liblzma5 libbz2-1.0 libreadline8t64
  libncursesw6 libtinfo6 libuuid1 zlib1g libdb5.3t64 libstdc++6 libgcc-s1)
(cd "$work/debs" && apt-get "${apt_opts[@]}" download "${packages[@]}" >&2)

rm -rf "$prefix.partial"
mkdir -p "$prefix.partial"
for f in "$work"/debs/*.deb; do dpkg -x "$f" "$prefix.partial"; done
# The paths patchelf writes are the final prefix's: the tree moves there whole.
patchelf --set-interpreter "$prefix/usr/lib64/ld-linux-x86-64.so.2" --force-rpath \
  --set-rpath "$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu" \
  "$prefix.partial/usr/bin/python$version"
rm -rf "$prefix"
mv "$prefix.partial" "$prefix"
own_pyconfig
chmod -R a+rX "$prefix"
"$python" -c 'import venv, ssl, sqlite3, ctypes' || die "$python does not run"
echo "$python"
