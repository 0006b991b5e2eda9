#!/usr/bin/env bash
# Create .venv and install etlens with every extra its tests need, plus Debian's chromium and Java (Spark).
# Safe to rerun: every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "== installing Debian chromium (browser tests)"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
fi
if ! command -v java >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "== installing Debian default-jre-headless (Spark tests of etlens.fleet)"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq default-jre-headless >/dev/null
fi
if ! command -v gcc >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "== installing Debian gcc (tests/qnn builds a small shim library for the QNN libraries)"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq gcc libc6-dev >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.etlens-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  echo "== installing torch==2.13.0 and etlens[executorch,dev]"
  log=.venv/pip-install.log
  if ! { .venv/bin/pip install -q -c constraints.txt torch==2.13.0 &&
         .venv/bin/pip install -q -c constraints.txt -e ".[executorch,dev]" &&
         .venv/bin/pip install -q --no-deps tosa-tools==2026.5.0; } >"$log" 2>&1; then  # cortex_m, see pyproject
    tail -n 60 "$log"; echo "setup: pip install failed (full log: $log)" >&2; exit 1
  fi
  touch "$stamp"
fi
