#!/usr/bin/env bash
# The README's test command: set up everything on a fresh machine, then run the tests in tiers.
#
#   bash scripts/test.sh           tier 1: every test module's fast cases, real ExecuTorch artifacts included
#                                  (-m "not fuzz and not corpus and not slow"; tests/test_collection.py fails
#                                  when a test file has no case here)
#   bash scripts/test.sh --heavy   tier 2: the heavy corpora (real architectures, LLM builds, NPU compiles):
#                                  the tests marked slow or corpus
#   bash scripts/test.sh --all     both tiers in one run (.ci/run runs tier 1, then tier 2)
#
# Plain `pytest` runs tier 1 too (pyproject.toml's addopts); -m fuzz is the fuzzing target. Runs with
# ETLENS_NO_SKIP=1 so that a skip (a missing extra, browser, Java) fails instead of hiding a regression
# (tests/_no_skip.py: ALLOWED_SKIPS lists the data-dependent ones). Extra arguments go to pytest and win
# (e.g. scripts/test.sh -k inspector). ETLENS_TEST_WORKERS sets the pytest-xdist workers (default 2: on 2 cores
# tier 1 took 867 s with 2 workers and 920 s with 3, back to back; the tests are CPU-bound).
#
# --under-load runs the tests on a busy machine, on purpose: a busy loop on every core but one (or
# --under-load=all: on every core; --under-load=N: N loops) for as long as the tests run, killed when
# they end (also on Ctrl-C, and each loop exits by itself if this script dies). The suite must pass
# like that: no test may rest on live timing noise (docs/fleet.md, "Tests on a busy machine").
set -euo pipefail
cd "$(dirname "$0")/.."
tier1="not fuzz and not corpus and not slow"
heavy="(slow or corpus) and not fuzz"
marker=$tier1
load=""
args=()
for a in "$@"; do
  case "$a" in
    --heavy) marker=$heavy ;;
    --all) marker="not fuzz" ;;
    --under-load) load=busy ;;
    --under-load=*) load=${a#--under-load=} ;;
    *) args+=("$a") ;;
  esac
done
bash scripts/setup.sh
# Let Python keep the modules it compiles (setup.sh installs without compiling; .gitignore has __pycache__/).
# With PYTHONDONTWRITEBYTECODE set, each of the suite's hundreds of processes would compile every module it
# imports again: torch, ExecuTorch, etlens, and pytest's rewrite of every test module on each worker.
unset PYTHONDONTWRITEBYTECODE
export ETLENS_FIXTURE_CACHE=${ETLENS_FIXTURE_CACHE:-$PWD/.cache/fixtures}
export ETLENS_NO_SKIP=${ETLENS_NO_SKIP:-1}
workers=${ETLENS_TEST_WORKERS:-2}
pytest_cmd=(.venv/bin/python -m pytest -n "$workers" --dist loadgroup -q -p no:cacheprovider -m "$marker" ${args[@]+"${args[@]}"})
if [ -z "$load" ]; then
  exec "${pytest_cmd[@]}"
fi
cores=$(nproc)
case "$load" in
  busy) n=$(( cores > 1 ? cores - 1 : 1 )) ;;
  all) n=$cores ;;
  *[!0-9]*|"") echo "test.sh: --under-load takes nothing, =all or =N (a number of busy loops), not '$load'" >&2; exit 2 ;;
  *) n=$load ;;
esac
hogs=()
stop_hogs() {
  for p in ${hogs[@]+"${hogs[@]}"}; do kill "$p" 2>/dev/null || true; done
  for p in ${hogs[@]+"${hogs[@]}"}; do wait "$p" 2>/dev/null || true; done
  hogs=()
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT
trap 'stop_hogs; exit 143' TERM
for _ in $(seq "$n"); do
  # pure CPU, no I/O; checks now and then that this script is alive, so a SIGKILLed run leaves no loop behind
  python3 -c 'import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(2_000_000):
        pass' "$$" &
  hogs+=($!)
done
echo "test.sh: under load: $n busy loop(s) on $cores core(s) (pids ${hogs[*]})"
start=$(date +%s)
rc=0
"${pytest_cmd[@]}" || rc=$?
echo "test.sh: tests took $(( $(date +%s) - start )) s under load ($n busy loop(s)), exit $rc"
exit $rc
