#!/usr/bin/env bash
# The README's test command: set up everything on a fresh machine, then run the whole test suite.
#
# Plain `pytest` runs the fast suite (pyproject.toml: not corpus, not slow, not fuzz). This command
# runs everything but the fuzzing target: the fast suite, the slow tests and the real-architecture
# corpus (-m "not fuzz"), with ETLENS_NO_SKIP=1 so that a skip (a missing extra, browser, Java)
# fails instead of hiding a regression (tests/conftest.py: ALLOWED_SKIPS lists the data-dependent
# ones). Extra arguments go to pytest and win (e.g. scripts/test.sh -k inspector, or -m "not corpus").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export ETLENS_FIXTURE_CACHE=${ETLENS_FIXTURE_CACHE:-$PWD/.cache/fixtures}
export ETLENS_NO_SKIP=${ETLENS_NO_SKIP:-1}
# the fixtures whose timings the fleet tests judge are measured first, alone on the machine
# (tests/fleet/prebuild.py says why); a failure here shows again, with its reason, in the tests that use them
if [ $# -eq 0 ]; then
  mkdir -p .cache
  .venv/bin/python -m tests.fleet.prebuild 2> .cache/prebuild.log \
    || echo "note: the timed fleet fixtures will be built by the tests (.cache/prebuild.log says why)"
fi
exec .venv/bin/python -m pytest -n 2 --dist loadgroup -q -p no:cacheprovider -m "not fuzz" "$@"
