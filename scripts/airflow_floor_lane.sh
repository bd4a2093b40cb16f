#!/usr/bin/env bash
# The "Airflow floor" lane (run by scripts/test.sh, so by CI): install the package into a fresh, separate
# virtualenv with the LOWEST Airflow the package declares (apache-airflow and the common-sql provider
# pinned to their floors, everything else as plain pip picks it, NO constraints file), then run the
# Airflow suite (tests/airflow without the slow real-retry and quality-replay tests) and the unit tests that
# touch Airflow. The main run covers the pinned Airflow of constraints/test.txt; this lane proves the bottom
# of the declared range. About 4-5 minutes on 2 cores beside the main pytest (install 50-85 s, tests
# ~200-270 s). scripts/test.sh runs it (install, then tests) in the background while the main pytest runs,
# after the newest lane.
#
# It fails (never skips) when the install fails: a declared floor that cannot be installed is a lie.
# Needs the services scripts/test.sh started (DPONE_TEST_* in the environment).
# Knobs: DPONE_PYTHON (interpreter, default python3), DPONE_FLOOR_VENV (venv path; default a new
# temporary folder, removed afterwards), DPONE_LANE_STEP (all, install or test: scripts/lane_common.sh),
# DPONE_FLOOR_UNIT (airflow: the unit tests that touch Airflow, the default; all: every unit test, ~60 s
# more; 0: none), extra arguments go to pytest.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANE=floor
LANE_VENV_VAR=DPONE_FLOOR_VENV
. scripts/lane_common.sh

#: The floors declared in pyproject.toml (docs/guide/compatibility.md says why these and not lower).
#: common-sql 1.28.1 is the lowest release Airflow 3.1.2 itself accepts; no older one can be installed with it.
AIRFLOW_FLOOR=3.1.2
COMMON_SQL_FLOOR=1.28.1
#: The OpenLineage provider of the test extra: 2.10.2 is the newest release that accepts common-sql 1.28.1.
OPENLINEAGE_FLOOR=2.10.2

#: What the lane runs: the Airflow suite without the slow real-retry test (~80 s on 2 cores), and the unit
#: tests that import the provider's Airflow side (hooks, operators, sensors) or Airflow itself. The other
#: unit tests never import Airflow; the main run and the newest lane run all of them (~60 s each).
#: Also left to the main run: the durable-replay DAG run (test_operator_quality_replay, ~45 s), whose
#: cost is the replay's own logic, reached through the same operator test_native_transfer_operator runs here.
SUITES=(tests/airflow --ignore=tests/airflow/test_real_retries.py --ignore=tests/airflow/test_operator_quality_replay.py)
case "${DPONE_FLOOR_UNIT:-airflow}" in
  all | 1) SUITES+=(tests/unit) ;;
  airflow)
    # (grep reads every file: with pipefail, an early exit would fail the pipeline with SIGPIPE)
    mapfile -t unit_airflow < <(grep -rlE 'airflow_provider_dpone\.(hooks|operators|sensors)|^\s*(from|import) airflow(\.| |$)' tests/unit --include='test_*.py' | sort)
    if [ "${#unit_airflow[@]}" -eq 0 ]; then
      say "FAILED: no unit test imports the provider's Airflow side: the selection below is broken"
      exit 1
    fi
    SUITES+=("${unit_airflow[@]}")
    ;;
  0) ;;
  *)
    say "FAILED: DPONE_FLOOR_UNIT=${DPONE_FLOOR_UNIT} (expected airflow, all or 0)"
    exit 2
    ;;
esac

# The floors must be the ones pyproject.toml declares, or this lane proves nothing.
for floor in "apache-airflow>=$AIRFLOW_FLOOR" "apache-airflow-providers-common-sql>=$COMMON_SQL_FLOOR" \
  "apache-airflow-providers-openlineage>=$OPENLINEAGE_FLOOR"; do
  if ! grep -q -F "\"$floor" pyproject.toml; then
    say "FAILED: pyproject.toml does not declare $floor (update AIRFLOW_FLOOR/COMMON_SQL_FLOOR here)"
    exit 1
  fi
done

lane_venv
if [ "$LANE_STEP" != test ]; then
  say "pip install '.[embedded,test]' apache-airflow(-core)==$AIRFLOW_FLOOR apache-airflow-providers-common-sql==$COMMON_SQL_FLOOR apache-airflow-providers-openlineage==$OPENLINEAGE_FLOOR (no constraints file)"
  lane_pip_install "the package cannot be installed with its declared Airflow floor" \
    ".[embedded,test]" "apache-airflow==$AIRFLOW_FLOOR" "apache-airflow-core==$AIRFLOW_FLOOR" \
    "apache-airflow-providers-common-sql==$COMMON_SQL_FLOOR" "apache-airflow-providers-openlineage==$OPENLINEAGE_FLOOR"
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
  lane_installed
fi
lane_pytest "${SUITES[@]}" "$@"
