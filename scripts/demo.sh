#!/usr/bin/env bash
# Set up the project (virtualenv with the embedded extra) and run `dpone demo` on the embedded default:
# SQLite source -> chDB target, SQLite checkpoints. Extra arguments go to `dpone demo` (e.g. --rows 1000000).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DPONE_SKIP_APT="${DPONE_SKIP_APT:-1}" bash scripts/setup.sh
exec "${DPONE_VENV:-$ROOT/.venv}/bin/dpone" demo "$@"
