#!/usr/bin/env bash
# Set up the project (virtualenv with the embedded extra) and run `dpone demo` on the embedded default:
# SQLite source -> chDB target, SQLite checkpoints. Extra arguments go to `dpone demo` (e.g. --rows 1000000,
# --dir DIR, --force). The demo folder (default dpone-demo/) is made in the current directory, and the
# follow-up commands it prints name the virtualenv's dpone, so they run as printed from this shell.
# Setup's own output (pip, the build backend's banners) goes to a log that is shown only if setup fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG="$(mktemp "${TMPDIR:-/tmp}/dpone-demo-setup.XXXXXX")"
if ! DPONE_SKIP_APT="${DPONE_SKIP_APT:-1}" bash "$ROOT/scripts/setup.sh" >"$LOG" 2>&1; then
  cat "$LOG" >&2
  printf '[demo] setup failed (log above, also in %s)\n' "$LOG" >&2
  exit 1
fi
grep -E '^\[setup\] (creating|installed|venv up to date)' "$LOG" || true
rm -f -- "$LOG"
exec "${DPONE_VENV:-$ROOT/.venv}/bin/dpone" demo "$@"
