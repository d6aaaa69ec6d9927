#!/usr/bin/env bash
# The whole test suite, on the environments scripts/setup.sh made:
#   bash scripts/test.sh [pytest args...]
# Lint, format and type checks (mypy, strict) and the layers' check; then the whole suite
# on .venv (CPython >= 3.12, sys.monitoring), .venv-3.14 and .venv-3.15 (Debian sid's
# CPython 3.14 and 3.15, sys.monitoring), the suite less the tests of reading traces
# back (reading_tests below) on .venv-fallback (CPython 3.11, PyEval_SetProfile), and
# the unit and core tests on an AddressSanitizer + UndefinedBehaviorSanitizer build
# (.venv-sanitize), in two lanes side by side (the machine has two cores; a stage uses
# about one); then, alone on the machine, the tests whose ground truth is the CPU time
# a thread got (the GIL's), the any-user tests (they stop that user's LTTng daemons),
# the end-to-end core against Debian sid's LTTng 2.16 and babeltrace2 2.1 (a session
# daemon of its own beside the machine's, scripts/with-lttng.sh) on .venv-3.14, and
# the smoke test on .venv-py38 (CPython 3.8). Every stage runs; the exit status is
# non-zero if any failed. The extension is built with -Werror in every venv but
# .venv-py38 (an install as users make it).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
for venv in .venv .venv-fallback .venv-3.14 .venv-3.15 .venv-py38 .venv-sanitize; do
  [[ -x $venv/bin/python ]] || { echo "test: $venv is missing: run bash scripts/setup.sh" >&2; exit 1; }
done
work=$(mktemp -d /tmp/pinsight-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

# A stage's failure is written to a file: the lanes are subshells.
failures=$work/failures
touch "$failures"
stage() {
  local name=$1 start=$SECONDS
  shift
  echo "== $name"
  "$@" || echo "$name" >>"$failures"
  echo "== $name: $((SECONDS - start)) s"
}
# pytest for a stage: a temporary directory and no cache of its own, so that two
# stages side by side share nothing.
run_pytest() {
  local python=$1
  shift
  "$python" -m pytest -p no:cacheprovider --basetemp="$(mktemp -d "$work/pytest.XXXXXX")" "$@"
}

stage "ruff" .venv/bin/python -m ruff check python tests bench scripts
stage "clang-format" bash -c "git ls-files 'src/*.c' 'src/*.cpp' 'src/*.h' | xargs clang-format --dry-run --Werror"
stage "mypy (strict)" .venv/bin/python -m mypy
# Every #include of src/ down the layers of docs/architecture.md, no folder cycle
# (the build makes an unlinked folder's header unreachable; this reads the sources).
stage "layers" .venv/bin/python scripts/check_layers.py
# The integration tests about reading traces back and the command line around them
# (report, unbatch, damaged traces, the CLI's signals and isolation, relay daemons, MPI
# ranks' labels, the flight recorder's runs and dumps (its process side, in C++, is checked
# on every interpreter by tests/core/test_flight_recorder.py), the site install another
# user runs, every child of a run under load: the write guard is C++, and tests/core/test_children.py kills children on every
# interpreter): what they check does not change with the traced interpreter, whose
# tracing tests/core and the rest of tests/integration check on each one. They run on .venv, .venv-3.14 and .venv-3.15; the 3.11 stage leaves them out,
# which keeps CI within its time.
reading_tests=(test_report.py test_report_trust.py test_report_rate.py test_trace_cli.py
  test_trace_isolation.py test_relayd.py test_mpi.py test_discards.py test_process_labels.py
  test_any_user.py test_native_correlation.py test_unbatch.py test_trace_children.py
  test_damaged.py test_flight_recorder.py)
not_reading=()
for t in "${reading_tests[@]}"; do
  [[ -f tests/integration/$t ]] || { echo "test: tests/integration/$t is gone: update reading_tests" >&2; exit 1; }
  not_reading+=("--ignore=tests/integration/$t")
done

# Alone on the machine: the GIL's and asyncio tasks' ground truth is a thread's own CPU
# time, which a second stage beside it would take away without any GIL; the any-user
# tests stop and start that user's LTTng daemons; the LTTng versions' tests need LTTng
# 2.16's session daemon of their own (scripts/with-lttng.sh) and start a user's.
alone_tests=(tests/integration/test_gil.py tests/integration/test_asyncio.py
  tests/integration/test_any_user.py tests/integration/test_lttng_versions.py)
not_alone=()
for t in "${alone_tests[@]}"; do
  [[ -f $t ]] || { echo "test: $t is gone: update alone_tests" >&2; exit 1; }
  not_alone+=("--ignore=$t")
done
# The LTTng 2.16 stage's tests: its own, and the end-to-end core, less what the LTTng in
# use does not change and takes long (asyncio, NumPy's names, thread pools, spawn and
# forkserver workers: the interpreter's side, which the 3.14 lane checks in full).
lttng_stage_tests=(tests/integration/test_lttng_versions.py tests/unit/test_reader.py
  tests/core/test_core.py tests/core/test_economy.py tests/core/test_session_control.py
  tests/core/test_children.py tests/integration/test_report.py
  tests/integration/test_tracecompass.py
  -k "not (test_asyncio or test_numpy_callee_names or test_thread_pool or thousands or spawn or forkserver)")
for t in "${lttng_stage_tests[@]}"; do
  [[ $t != tests/* || -f $t ]] || { echo "test: $t is gone: update lttng_stage_tests" >&2; exit 1; }
done
# Pytest arguments given to this script choose the tests of every stage but the
# sanitizers' (the unit and core tiers), and nothing runs alone.
if (($#)); then not_alone=(); fi

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
    run_pytest .venv-sanitize/bin/python tests/unit tests/core
}

# The lanes: about the same length (the sanitizer's build first, while the other lane's
# first stage runs).
lane_a() {
  stage "ASan+UBSan build (-Werror) and core tests on $(.venv-sanitize/bin/python -V)" sanitized
  stage "suite on $(.venv/bin/python -V)" run_pytest .venv/bin/python "${not_alone[@]}" "$@"
  stage "suite on $(.venv-fallback/bin/python -V) (setprofile backend; reading tests left out)" \
    run_pytest .venv-fallback/bin/python "${not_alone[@]}" "${not_reading[@]}" "$@"
}
lane_b() {
  stage "suite on $(.venv-3.15/bin/python -V) (Debian sid's)" \
    run_pytest .venv-3.15/bin/python "${not_alone[@]}" "$@"
  stage "suite on $(.venv-3.14/bin/python -V) (Debian sid's)" \
    run_pytest .venv-3.14/bin/python "${not_alone[@]}" "$@"
}
# One session daemon for both lanes, started before them (two first tests would race
# to start one each).
lttng list >/dev/null 2>&1 || lttng-sessiond --daemonize || echo "sessiond" >>"$failures"
lanes_start=$SECONDS
lane_a "$@" >"$work/lane-a.log" 2>&1 &
lane_a_pid=$!
lane_b "$@" >"$work/lane-b.log" 2>&1 &
lane_b_pid=$!
wait "$lane_a_pid" "$lane_b_pid"
cat "$work/lane-a.log" "$work/lane-b.log"
echo "== both lanes: $((SECONDS - lanes_start)) s"

if ((! $#)); then
  for venv in .venv .venv-fallback .venv-3.15 .venv-3.14; do
    stage "alone: GIL ground truth on $($venv/bin/python -V)" run_pytest $venv/bin/python tests/integration/test_gil.py
    stage "alone: asyncio tasks' ground truth on $($venv/bin/python -V)" run_pytest $venv/bin/python tests/integration/test_asyncio.py
  done
  stage "alone: any-user install" run_pytest .venv/bin/python tests/integration/test_any_user.py
  # LTTng 2.16 and babeltrace2 2.1 (Debian sid's, /opt/pinsight-lttng), a session daemon
  # of their own beside the machine's 2.13 one, which keeps running: the versions'
  # tests, and the end-to-end core (the tracer's events and payloads, the session
  # control, the children, the reader, report and Trace Compass's analyses) on traces
  # LTTng 2.16 wrote. with-lttng.sh stops its daemon whatever happens.
  stage "alone: LTTng 2.16 and babeltrace2 2.1 (Debian sid's) on $(.venv-3.14/bin/python -V)" \
    bash scripts/with-lttng.sh "${PINSIGHT_LTTNG_PREFIX:-/opt/pinsight-lttng}" -- \
    env PINSIGHT_PYTHON_LTTNG_STAGE=1 .venv-3.14/bin/python -m pytest -p no:cacheprovider \
    --basetemp="$(mktemp -d "$work/pytest.XXXXXX")" "${lttng_stage_tests[@]}"
  # The oldest CPython: the backends, attach, and the GIL's ground truth (the fallback's
  # mechanism, checked on 3.11 in full, holds on 3.8 as well).
  stage "smoke test on $(.venv-py38/bin/python -V)" run_pytest .venv-py38/bin/python tests/core/test_backends.py \
    "tests/integration/test_attach.py::test_attach_record_detach[threads-spin]" \
    tests/integration/test_gil.py::test_two_python_threads_wait_is_wall_minus_cpu \
    tests/integration/test_gil.py::test_zlib_compress_releases_the_gil_for_its_whole_duration
fi

mapfile -t failed <"$failures"
if ((${#failed[@]})); then
  printf 'test: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "test: all stages passed"
