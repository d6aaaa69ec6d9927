#!/usr/bin/env bash
# The whole test suite, on the environments scripts/setup.sh made:
#   bash scripts/test.sh [pytest args...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[[ -x .venv/bin/python ]] || { echo "test: .venv is missing: run bash scripts/setup.sh" >&2; exit 1; }
.venv/bin/python -m ruff check python tests bench scripts
git ls-files 'src/*.cpp' 'src/*.h' | xargs clang-format --dry-run --Werror
.venv/bin/python -m pytest "$@"
