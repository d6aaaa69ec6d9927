#!/usr/bin/env bash
# Debian unstable ("sid") software for this Debian 12 machine, in a private prefix:
#   bash scripts/sid-prefix.sh 3.14|3.15 [PREFIX]   CPython (default /opt/pinsight-cpython/3.1x)
#   bash scripts/sid-prefix.sh lttng [PREFIX]       LTTng-tools, LTTng-UST and babeltrace2
#                                                   (default /opt/pinsight-lttng)
# Bookworm has neither CPython 3.14/3.15 nor LTTng 2.15+ and babeltrace2 2.1. Sid's
# binary packages are built against a newer glibc, so they are unpacked, with sid's
# libc6 and the libraries they need, into a private prefix, and its programs are
# pointed at that prefix's loader and libraries (patchelf: the ELF interpreter, and a
# DT_RPATH, which unlike RUNPATH also serves the libraries' own dependencies). Nothing
# is installed into /, and the machine's apt sources stay as they are: apt runs with
# a configuration of its own. Idempotent: a prefix whose programs run is kept. Prints
# the interpreter's path (CPython) or the prefix (LTTng) on the last line.
#
# The LTTng prefix also holds:
#   PREFIX/libs    links to its LTTng, babeltrace2 and supporting libraries, without
#                  the C and C++ runtimes (glibc, libstdc++, libgcc_s): what
#                  LD_LIBRARY_PATH names for an interpreter whose glibc is sid's (the
#                  CPython prefixes above) to load LTTng 2.16 and babeltrace2 2.1,
#                  while the machine's own programs keep their C runtime
#   PREFIX/env.sh  those variables (PATH, LD_LIBRARY_PATH, babeltrace2's plugin path,
#                  the session daemon's consumer daemon); scripts/with-lttng.sh runs a
#                  command with them beside a session daemon of its own
set -euo pipefail

what=${1:?usage: sid-prefix.sh 3.14|3.15|lttng [PREFIX]}
case $what in
  3.*) prefix=${2:-/opt/pinsight-cpython/$what} ;;
  lttng) prefix=${2:-/opt/pinsight-lttng} ;;
  *) echo "sid-prefix: error: expected a CPython version (3.14, 3.15) or lttng, got '$what'" >&2; exit 2 ;;
esac
arch=$(uname -m)-linux-gnu
libdir=$prefix/usr/lib/$arch

# The Debian mirror this machine's own apt sources name (its main archive, not the
# security one); PINSIGHT_DEBIAN_MIRROR overrides it.
machine_mirror() {
  local sources
  sources=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true)
  grep -Eo '(URIs:[[:space:]]*|^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)[a-z]+://[^[:space:]]+' <<<"$sources" |
    grep -Eo '[a-z]+://[^[:space:]]+' | grep -v -- '-security' | head -n 1 || true
}

die() { echo "sid-prefix: error: $*" >&2; exit 1; }

# Debian's <python3.x/pyconfig.h> only includes <x86_64-linux-gnu/python3.x/pyconfig.h>,
# which a compiler finds under /usr/include, not under the prefix: the prefix holds
# one architecture, so its own file takes the wrapper's place, and anything built
# against sysconfig's include directory (pip, the tests' extensions) finds it.
own_pyconfig() {
  local include=$prefix/usr/include
  local arch_h=$include/$arch/python$what/pyconfig.h
  [[ -f $arch_h ]] && ! cmp -s "$arch_h" "$include/python$what/pyconfig.h" &&
    cp "$arch_h" "$include/python$what/pyconfig.h"
  return 0
}

# Whether the prefix's programs run (the check that keeps a prefix, and the last one).
python_runs() { "$prefix/usr/bin/python$what" -c 'import venv, ssl, sqlite3, ctypes' 2>/dev/null; }
lttng_runs() {
  local p
  for p in lttng lttng-sessiond lttng-relayd babeltrace2; do
    "$prefix/usr/bin/$p" --version >/dev/null 2>&1 || return 1
  done
  [[ -f $prefix/env.sh && -d $prefix/libs ]]
}

# Every library its programs load, and what babeltrace2 and LTTng-UST load, must come
# from the prefix: one of the machine's (bookworm's) means a package missing from the
# list below.
check_closure() {
  local loader=$prefix/usr/lib64/ld-linux-x86-64.so.2 f outside=()
  for f in "${programs[@]/#/$prefix/}" "$libdir"/babeltrace2/plugins/*.so "$libdir"/liblttng-*.so.? \
    "$libdir"/libbabeltrace2*.so.?; do
    while read -r line; do outside+=("$(basename "$f"): $line"); done < <(
      "$loader" --list --library-path "$libdir" "$f" 2>&1 | grep -E '=> (/|not found)' |
        grep -v -- "=> $prefix/" || true)
  done
  ((${#outside[@]} == 0)) || die "libraries missing from $prefix (add their packages to sid-prefix.sh):
$(printf '  %s\n' "${outside[@]}" | sort -u)"
}

if [[ $what == lttng ]]; then
  if lttng_runs; then echo "$prefix"; exit 0; fi
elif python_runs; then
  own_pyconfig
  echo "$prefix/usr/bin/python$what"
  exit 0
fi
[[ $(id -u) -eq 0 ]] || die "need root to write $prefix"
command -v patchelf >/dev/null || die "patchelf is missing (apt-get install patchelf)"
mirror=${PINSIGHT_DEBIAN_MIRROR:-$(machine_mirror)}
[[ -n $mirror ]] || die "no Debian mirror named in /etc/apt/sources.list(.d): set PINSIGHT_DEBIAN_MIRROR"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/debs"
printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s sid main\n' "$mirror" >"$work/sources.list"
apt_opts=(-q -oDir::Etc::SourceList="$work/sources.list" -oDir::Etc::SourceParts=/dev/null
  -oDir::State::Lists="$work/lists" -oAPT::Sandbox::User=root)
# The C and C++ runtimes every prefix carries.
runtime=(libc6 libstdc++6 libgcc-s1 libatomic1 zlib1g libzstd1 liblzma5 libbz2-1.0 libssl3t64 libffi8)
if [[ $what == lttng ]]; then
  echo "sid-prefix: fetching LTTng and babeltrace2 from Debian sid into $prefix" >&2
  packages=(lttng-tools liblttng-ctl0t64 liblttng-ust1t64 liblttng-ust-common1t64 liblttng-ust-ctl6
    liburcu8t64 libxml2-16 libpopt0 libkmod2 libnuma1
    babeltrace2 libbabeltrace2-0 python3-bt2 libglib2.0-0t64 libdw1t64 libelf1t64 libpcre2-8-0
    "${runtime[@]}")
  programs=(usr/bin/lttng usr/bin/lttng-sessiond usr/bin/lttng-relayd usr/bin/lttng-crash
    usr/bin/babeltrace2 "usr/lib/$arch/lttng/libexec/lttng-consumerd")
else
  echo "sid-prefix: fetching CPython $what from Debian sid into $prefix" >&2
  packages=(python$what python$what-minimal libpython$what-minimal libpython$what-stdlib
    libpython$what-dev python$what-dev libpython$what libpython$what-testsuite
    python3-pip-whl python3-setuptools-whl
    libexpat1 libsqlite3-0 libreadline8t64 libncursesw6 libtinfo6 libuuid1 libdb5.3t64
    "${runtime[@]}")
  programs=("usr/bin/python$what")
fi
apt-get "${apt_opts[@]}" update >&2 || die "apt-get update from $mirror (sid) failed"
(cd "$work/debs" && apt-get "${apt_opts[@]}" download "${packages[@]}" >&2) ||
  die "downloading ${packages[*]} from $mirror (sid) failed"

rm -rf "$prefix.partial"
mkdir -p "$prefix.partial"
for f in "$work"/debs/*.deb; do dpkg -x "$f" "$prefix.partial"; done
# The paths patchelf writes are the final prefix's: the tree moves there whole.
for p in "${programs[@]}"; do
  patchelf --set-interpreter "$prefix/usr/lib64/ld-linux-x86-64.so.2" --force-rpath \
    --set-rpath "$libdir:$prefix/lib/$arch" "$prefix.partial/$p"
done
rm -rf "$prefix"
mv "$prefix.partial" "$prefix"

if [[ $what == lttng ]]; then
  check_closure
  mkdir -p "$prefix/libs"
  for f in "$libdir"/*.so.*; do
    case $(basename "$f") in
      # glibc's own libraries, the loader and the C++ runtime stay the interpreter's.
      ld-linux* | libc.so.* | libm.so.* | libmvec.so.* | libdl.so.* | libpthread.so.* | librt.so.* | \
        libresolv.so.* | libnss_* | libnsl.so.* | libanl.so.* | libBrokenLocale.so.* | libutil.so.* | \
        libc_malloc_debug.so.* | libthread_db.so.* | libstdc++.so.* | libgcc_s.so.*) ;;
      *) ln -sfn "$f" "$prefix/libs/$(basename "$f")" ;;
    esac
  done
  cat >"$prefix/env.sh" <<ENV
# LTTng and babeltrace2 of $prefix (Debian sid's): source it, then run an interpreter
# whose glibc is sid's (/opt/pinsight-cpython/3.1x). scripts/with-lttng.sh adds a
# session daemon of its own.
export PATH=$prefix/usr/bin:\$PATH
export LD_LIBRARY_PATH=$prefix/libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
# babeltrace2's plugins and plugin providers: the prefix's, never the machine's (2.0).
export BABELTRACE_PLUGIN_PATH=$libdir/babeltrace2/plugins
export LIBBABELTRACE2_PLUGIN_PROVIDER_DIR=$libdir/babeltrace2/plugin-providers
# The consumer daemon a session daemon of this prefix starts.
export LTTNG_CONSUMERD64_BIN=$libdir/lttng/libexec/lttng-consumerd
export LTTNG_CONSUMERD64_LIBDIR=$libdir
export PINSIGHT_LTTNG_PREFIX=$prefix
ENV
  chmod -R a+rX "$prefix"
  lttng_runs || die "the LTTng programs in $prefix do not run"
  echo "$prefix"
else
  own_pyconfig
  chmod -R a+rX "$prefix"
  python_runs || die "$prefix/usr/bin/python$what does not run"
  echo "$prefix/usr/bin/python$what"
fi
