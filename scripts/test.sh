#!/usr/bin/env bash
# The whole test suite, on the environments scripts/setup.sh made:
#   bash scripts/test.sh [pytest args...]
# Lint, format and type checks (mypy, strict), the layers' check, then the suite on .venv (CPython >= 3.12,
# sys.monitoring), on .venv-fallback (CPython 3.11, PyEval_SetProfile), on .venv-3.14 and
# .venv-3.15 (Debian sid's CPython 3.14 and 3.15, sys.monitoring; 3.11 and 3.15 leave out
# the tests of reading traces back, reading_tests below, and 3.14 runs the tests that
# can differ by interpreter, version_tests), the unit and core
# tests on an AddressSanitizer + UndefinedBehaviorSanitizer build (.venv-sanitize), then
# the smoke test on .venv-py38 (CPython 3.8). Every stage runs; the exit status
# is non-zero if any failed. The extension is built with -Werror in every venv but
# .venv-py38 (an install as users make it).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
for venv in .venv .venv-fallback .venv-3.14 .venv-3.15 .venv-py38 .venv-sanitize; do
  [[ -x $venv/bin/python ]] || { echo "test: $venv is missing: run bash scripts/setup.sh" >&2; exit 1; }
done

failed=()
stage() {
  local name=$1 start=$SECONDS
  shift
  echo "== $name"
  "$@" || failed+=("$name")
  echo "== $name: $((SECONDS - start)) s"
}

stage "ruff" .venv/bin/python -m ruff check python tests bench scripts
stage "clang-format" bash -c "git ls-files 'src/*.c' 'src/*.cpp' 'src/*.h' | xargs clang-format --dry-run --Werror"
stage "mypy (strict)" .venv/bin/python -m mypy
# Every #include of src/ down the layers of docs/architecture.md, no folder cycle
# (the build makes an unlinked folder's header unreachable; this reads the sources).
stage "layers" .venv/bin/python scripts/check_layers.py
# The integration tests about reading traces back and the command line around them
# (report, the CLI's signals and isolation, relay daemons, MPI ranks' labels, the site
# install another user runs, every child of a run under load: the write guard is C++,
# and tests/core/test_children.py kills children on every interpreter): what they
# check does not change with the traced
# interpreter, whose tracing tests/core and the rest of tests/integration check on each
# one. They run on .venv; the 3.11 and 3.15 stages leave them out, which keeps CI
# within its time.
reading_tests=(test_report.py test_report_trust.py test_report_rate.py test_trace_cli.py
  test_trace_isolation.py test_relayd.py test_mpi.py test_discards.py test_process_labels.py
  test_any_user.py test_native_correlation.py test_trace_children.py)
not_reading=()
for t in "${reading_tests[@]}"; do
  [[ -f tests/integration/$t ]] || { echo "test: tests/integration/$t is gone: update reading_tests" >&2; exit 1; }
  not_reading+=("--ignore=tests/integration/$t")
done

# CPython 3.14 lies between 3.13 and 3.15, which run the suite, with 3.15's attach
# (sys.remote_exec) and per-code state (beside the code objects): its stage runs what
# can differ from one interpreter to the next, its own CPython suites first among them.
version_tests=(tests/unit tests/core/test_core.py tests/core/test_backends.py
  tests/core/test_cpython_versions.py tests/core/test_never_hang.py
  tests/core/test_neighbours.py tests/core/test_cpython_suites_in_one_process.py
  tests/integration/test_cpython_suites.py tests/integration/test_attach.py)
# Pytest arguments given to this script choose the tests of every stage.
if (($#)); then version_tests=("$@"); fi

stage "suite on $(.venv/bin/python -V)" .venv/bin/python -m pytest "$@"
stage "suite on $(.venv-fallback/bin/python -V) (setprofile backend; reading tests left out)" \
  .venv-fallback/bin/python -m pytest "${not_reading[@]}" "$@"
stage "suite on $(.venv-3.15/bin/python -V) (Debian sid's; reading tests left out)" \
  .venv-3.15/bin/python -m pytest "${not_reading[@]}" "$@"
stage "interpreter's own tests on $(.venv-3.14/bin/python -V) (Debian sid's)" \
  .venv-3.14/bin/python -m pytest "${version_tests[@]}"
# AddressSanitizer + UndefinedBehaviorSanitizer, as memray does: rebuild the extension
# into .venv-sanitize (incremental, in build/sanitize; -Werror like every development
# build) and run the core tests with the runtimes preloaded, since CPython itself is
# not instrumented. Every report stops the process that made it, so the test fails.
# Leak checking stays off: CPython frees little at exit by design. The tiers run are
# tests/unit and tests/core (tests/conftest.py): the tracer's own code, end to end with
# LTTng alone. tests/integration stays out (tests/integration/test_alloc.py's malloc
# interposer and ASan's cannot both come first, and the neighbours it runs -- MPI,
# compilers, relayd -- are not what the sanitizers look at).
sanitized() {
  bash scripts/build-sanitized.sh --no-deps -e . || return 1
  local runtimes
  runtimes="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)"
  PINSIGHT_PYTHON_SANITIZER_STAGE=1 LD_PRELOAD="$runtimes" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    .venv-sanitize/bin/python -m pytest -p no:cacheprovider tests/unit tests/core
}
stage "ASan+UBSan build (-Werror) and core tests on $(.venv-sanitize/bin/python -V)" sanitized
# The oldest CPython: the backends, attach, and the GIL's ground truth (the fallback's
# mechanism, checked on 3.11 in full, holds on 3.8 as well).
stage "smoke test on $(.venv-py38/bin/python -V)" .venv-py38/bin/python -m pytest tests/core/test_backends.py \
  "tests/integration/test_attach.py::test_attach_record_detach[threads-spin]" \
  tests/integration/test_gil.py::test_two_python_threads_wait_is_wall_minus_cpu \
  tests/integration/test_gil.py::test_zlib_compress_releases_the_gil_for_its_whole_duration

if ((${#failed[@]})); then
  printf 'test: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "test: all stages passed"
