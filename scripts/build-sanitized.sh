#!/usr/bin/env bash
# Builds pinsight-python into .venv-sanitize with AddressSanitizer and
# UndefinedBehaviorSanitizer, in build/sanitize, without build isolation (so a
# rebuild compiles only what changed). The pip arguments follow:
#   bash scripts/build-sanitized.sh -e ".[test]"    (scripts/setup.sh)
#   bash scripts/build-sanitized.sh --no-deps -e .  (scripts/test.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
.venv-sanitize/bin/python -m pip install -q --no-build-isolation \
  --config-settings=cmake.define.PINSIGHT_PYTHON_SANITIZE=ON \
  --config-settings=cmake.define.PINSIGHT_PYTHON_TESTING=ON \
  --config-settings=build-dir=build/sanitize "$@"
