#!/usr/bin/env bash
# The "newest releases" lane (run by scripts/test.sh, so by CI): install the package into a fresh,
# separate virtualenv with the newest releases its declared ranges allow (plain pip, NO constraints file),
# then run the unit tests and the chDB-backed suites (plus the 18.16 server sink suite) against them.
# A release inside a declared range that breaks users shows up here, not in a user's first run.
#
# It fails (never skips) when the install fails: a range that cannot be installed is a broken package.
# Needs the services scripts/test.sh started (DPONE_TEST_* in the environment).
# Knobs: DPONE_PYTHON (interpreter, default python3), DPONE_NEWEST_VENV (venv path; default a new
# temporary folder, removed afterwards), extra arguments go to pytest.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${DPONE_PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
unset PIP_CONSTRAINT PIP_REQUIREMENT
say() { printf '[newest] %s\n' "$*"; }
now() { date +%s; }
T0=$(now)

#: What the lane runs: the unit tests, the suites on embedded chDB, and the server sink suite.
SUITES=(
  tests/unit
  tests/integration/test_clickhouse_sink_chdb.py
  tests/integration/test_transfer_paths.py
  tests/integration/test_demo_folder.py
  tests/integration/test_route_spelling.py
  tests/integration/test_target_checked_when_all_skipped.py
  tests/integration/test_clickhouse_sink_http.py
)

made_venv=0
if [ -n "${DPONE_NEWEST_VENV:-}" ]; then
  VENV="$DPONE_NEWEST_VENV"
  rm -rf -- "$VENV"
else
  VENV="$(mktemp -d "${TMPDIR:-/tmp}/dpone-newest.XXXXXX")/venv"
  made_venv=1
fi
cleanup() {
  # ~1 GB of files (Airflow, chDB): removed in the background so the lane's time is install + tests only
  if [ "$made_venv" = 1 ]; then (rm -rf -- "$(dirname "$VENV")" </dev/null >/dev/null 2>&1 &); fi
}
trap cleanup EXIT

say "fresh venv $VENV ($("$PYTHON" -V 2>&1))"
"$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
LOG="$(dirname "$VENV")/pip.log"
t=$(now)
say "pip install '.[embedded,test]' with the newest allowed releases (no constraints file)"
if ! { "$PY" -m pip install -q --upgrade pip && "$PY" -m pip install -q --progress-bar off ".[embedded,test]"; } >"$LOG" 2>&1; then
  grep -v -E "^WARNING: Location '.*' is ignored" "$LOG" | tail -n 40 >&2 || true
  say "FAILED: the package cannot be installed with the newest releases its ranges allow"
  exit 1
fi
say "installed in $(($(now) - t))s:"
"$PY" -m pip list --format=freeze 2>/dev/null |
  grep -i -E '^(clickhouse-connect|chdb|chdb-core|apache-airflow|apache-airflow-core|apache-airflow-providers-openlineage|pydantic|pyarrow|sqlalchemy|pymssql|psycopg2-binary|click|rich)==' |
  sed 's/^/  /'

# Run from the repository (tests import it), but against the venv's installed dependencies.
say "pytest ${SUITES[*]} $*"
rc=0
PATH="$VENV/bin:$PATH" "$PY" -m pytest -q -p no:cacheprovider --timeout="${DPONE_TEST_TIMEOUT:-600}" \
  "${SUITES[@]}" "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
  say "FAILED: pytest collected no test"
  rc=1
fi
say "exit $rc in $(($(now) - T0))s"
exit "$rc"
