#!/usr/bin/env bash
# The whole test suite, on the environments scripts/setup.sh made:
#   bash scripts/test.sh [pytest args...]
# Lint, format and type checks (mypy, strict), then the suite on .venv (CPython >= 3.12,
# sys.monitoring) and on .venv-fallback (CPython 3.11, PyEval_SetProfile), then
# the smoke test on .venv-py38 (CPython 3.8). Every stage runs; the exit status
# is non-zero if any failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
for venv in .venv .venv-fallback .venv-py38; do
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
stage "clang-format" bash -c "git ls-files 'src/*.cpp' 'src/*.h' | xargs clang-format --dry-run --Werror"
stage "mypy (strict)" .venv/bin/python -m mypy
stage "suite on $(.venv/bin/python -V)" .venv/bin/python -m pytest "$@"
stage "suite on $(.venv-fallback/bin/python -V) (setprofile backend)" .venv-fallback/bin/python -m pytest "$@"
stage "smoke test on $(.venv-py38/bin/python -V)" .venv-py38/bin/python -m pytest tests/test_backends.py \
  "tests/test_attach.py::test_attach_record_detach[threads-spin]"

if ((${#failed[@]})); then
  printf 'test: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "test: all stages passed"
