#!/usr/bin/env bash
# The README's test command: set up everything on a fresh machine, then run the test suite.
# Extra arguments go to pytest (e.g. scripts/test.sh -k inspector).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export ETLENS_FIXTURE_CACHE=${ETLENS_FIXTURE_CACHE:-$PWD/.cache/fixtures}
exec .venv/bin/python -m pytest -n 2 --dist loadgroup -q -p no:cacheprovider "$@"
