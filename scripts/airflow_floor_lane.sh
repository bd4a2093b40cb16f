#!/usr/bin/env bash
# The "Airflow floor" lane (run by scripts/test.sh, so by CI): install the package into a fresh, separate
# virtualenv with the LOWEST Airflow the package declares (apache-airflow and the common-sql provider
# pinned to their floors, everything else as plain pip picks it, NO constraints file), then run the
# Airflow suite (tests/airflow without the slow real-retry test) and the unit tests against it. The main
# run covers the pinned Airflow of constraints/test.txt; this lane proves the bottom of the declared range.
# About 2.5-3 minutes on 2 cores (install 50-85 s, tests ~105 s), after the main pytest, not beside it.
#
# It fails (never skips) when the install fails: a declared floor that cannot be installed is a lie.
# Needs the services scripts/test.sh started (DPONE_TEST_* in the environment).
# Knobs: DPONE_PYTHON (interpreter, default python3), DPONE_FLOOR_VENV (venv path; default a new
# temporary folder, removed afterwards), DPONE_FLOOR_UNIT=0 (leave out tests/unit, ~25 s), extra
# arguments go to pytest.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${DPONE_PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
unset PIP_CONSTRAINT PIP_REQUIREMENT
say() { printf '[floor] %s\n' "$*"; }
now() { date +%s; }
T0=$(now)

#: The floors declared in pyproject.toml (docs/guide/compatibility.md says why these and not lower).
#: common-sql 1.28.1 is the lowest release Airflow 3.1.2 itself accepts; no older one can be installed with it.
AIRFLOW_FLOOR=3.1.2
COMMON_SQL_FLOOR=1.28.1
#: The OpenLineage provider of the test extra: 2.10.2 is the newest release that accepts common-sql 1.28.1.
OPENLINEAGE_FLOOR=2.10.2

#: What the lane runs: the Airflow suite without the slow real-retry test (~80 s on 2 cores), the unit tests.
SUITES=(tests/airflow --ignore=tests/airflow/test_real_retries.py)
if [ "${DPONE_FLOOR_UNIT:-1}" = 1 ]; then
  SUITES+=(tests/unit)
fi

# The floors must be the ones pyproject.toml declares, or this lane proves nothing.
for floor in "apache-airflow>=$AIRFLOW_FLOOR" "apache-airflow-providers-common-sql>=$COMMON_SQL_FLOOR" \
  "apache-airflow-providers-openlineage>=$OPENLINEAGE_FLOOR"; do
  if ! grep -q -F "\"$floor" pyproject.toml; then
    say "FAILED: pyproject.toml does not declare $floor (update AIRFLOW_FLOOR/COMMON_SQL_FLOOR here)"
    exit 1
  fi
done

made_venv=0
if [ -n "${DPONE_FLOOR_VENV:-}" ]; then
  VENV="$DPONE_FLOOR_VENV"
  rm -rf -- "$VENV"
else
  VENV="$(mktemp -d "${TMPDIR:-/tmp}/dpone-floor.XXXXXX")/venv"
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
say "pip install '.[embedded,test]' apache-airflow(-core)==$AIRFLOW_FLOOR apache-airflow-providers-common-sql==$COMMON_SQL_FLOOR apache-airflow-providers-openlineage==$OPENLINEAGE_FLOOR (no constraints file)"
if ! { "$PY" -m pip install -q --upgrade pip &&
  "$PY" -m pip install -q --progress-bar off ".[embedded,test]" "apache-airflow==$AIRFLOW_FLOOR" \
    "apache-airflow-core==$AIRFLOW_FLOOR" "apache-airflow-providers-common-sql==$COMMON_SQL_FLOOR" \
    "apache-airflow-providers-openlineage==$OPENLINEAGE_FLOOR"; } >"$LOG" 2>&1; then
  grep -v -E "^WARNING: Location '.*' is ignored" "$LOG" | tail -n 40 >&2 || true
  say "FAILED: the package cannot be installed with its declared Airflow floor"
  exit 1
fi
say "installed in $(($(now) - t))s:"
FROZEN="$("$PY" -m pip list --format=freeze 2>/dev/null)"
printf '%s\n' "$FROZEN" |
  grep -i -E '^(apache-airflow|apache-airflow-core|apache-airflow-task-sdk|apache-airflow-providers-common-sql|apache-airflow-providers-openlineage|sqlalchemy|pydantic|structlog|fastapi|clickhouse-connect|chdb)==' |
  sed 's/^/  /'
# An install that "succeeds" but pulled another Airflow (a resolver backtrack) would test the wrong thing.
# (grep reads the whole list: with pipefail, grep -q would stop early and fail the writer with SIGPIPE)
if ! printf '%s\n' "$FROZEN" | grep -x -i "apache-airflow-core==$AIRFLOW_FLOOR" >/dev/null; then
  say "FAILED: the venv does not hold apache-airflow-core $AIRFLOW_FLOOR"
  exit 1
fi

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
