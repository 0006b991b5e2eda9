#!/usr/bin/env bash
# Create .venv and install etlens with every extra its tests need, plus Debian's chromium and Java (Spark).
# Safe to rerun: every step is skipped when already done.
#
# On a fresh machine the Debian packages (one apt-get update, one install) download and unpack in the
# background while pip and uv install the Python side; neither byte-compiles the 23,000 modules it unpacks
# (Python compiles a module the first time it is imported, and only a fraction ever is; scripts/test.sh
# makes sure it may keep what it compiled).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
debs=()
command -v chromium >/dev/null 2>&1 || debs+=(chromium fonts-dejavu-core)  # browser tests
command -v java >/dev/null 2>&1 || debs+=(default-jre-headless)            # Spark tests of etlens.fleet
command -v gcc >/dev/null 2>&1 || debs+=(gcc libc6-dev)                    # tests/qnn builds a small shim library
apt_pid=""
apt_log=""
if [ ${#debs[@]} -gt 0 ]; then
  apt_log=$(mktemp "${TMPDIR:-/tmp}/etlens-setup-apt.XXXXXX")
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "== installing Debian ${debs[*]} (in the background)"
  ( $SUDO apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${debs[@]}" ) >"$apt_log" 2>&1 &
  apt_pid=$!
fi
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.etlens-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  echo "== installing torch==2.13.0 and etlens[executorch,dev]"
  log=.venv/pip-install.log
  # pip takes torch from this machine's own CPU build (PIP_FIND_LINKS); uv then fetches the other ~170
  # packages in parallel (pip downloads them one by one: ~2 of the install's ~4 minutes). uv keeps the
  # installed torch (torch==2.13.0 is satisfied by 2.13.0+cpu) and compiles nothing, like pip --no-compile.
  pip=(.venv/bin/pip install -q --no-compile)
  uv=(.venv/bin/uv pip install -q --python .venv/bin/python)
  rest() {  # the project and its extras; pip when uv is not there or fails
    if [ -x .venv/bin/uv ] && "${uv[@]}" -c constraints.txt -e ".[executorch,dev]" &&
       "${uv[@]}" --no-deps tosa-tools==2026.5.0; then  # cortex_m, see pyproject
      return 0
    fi
    echo "setup: uv failed, installing with pip" >&2
    "${pip[@]}" -c constraints.txt -e ".[executorch,dev]" && "${pip[@]}" --no-deps tosa-tools==2026.5.0
  }
  if ! { "${pip[@]}" -c constraints.txt torch==2.13.0 uv && rest; } >"$log" 2>&1; then
    tail -n 60 "$log"; echo "setup: pip install failed (full log: $log)" >&2
    [ -z "$apt_pid" ] || wait "$apt_pid" || true
    exit 1
  fi
  touch "$stamp"
fi
if [ -n "$apt_pid" ]; then
  if ! wait "$apt_pid"; then
    tail -n 40 "$apt_log"; echo "setup: apt-get install ${debs[*]} failed (log: $apt_log)" >&2; exit 1
  fi
fi
[ -z "$apt_log" ] || rm -f "$apt_log"
