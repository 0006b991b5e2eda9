#!/usr/bin/env bash
# The README's main-job command: set up, then write the demo report (report.html + trace files).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
unset PYTHONDONTWRITEBYTECODE  # the report's worker child imports what this process compiled (setup.sh: --no-compile)
exec .venv/bin/etlens report --demo -o "${1:-out/report.html}"
