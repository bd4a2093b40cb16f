#!/usr/bin/env bash
# The "newest releases" lane (run by scripts/test.sh, so by CI): install the package into a fresh,
# separate virtualenv with the newest releases its declared ranges allow (plain pip, NO constraints file),
# then run the unit tests and the chDB-backed suites (plus the 18.16 server sink suite) against them.
# A release inside a declared range that breaks users shows up here, not in a user's first run.
#
# It fails (never skips) when the install fails: a range that cannot be installed is a broken package.
# Needs the services scripts/test.sh started (DPONE_TEST_* in the environment).
# Knobs: DPONE_PYTHON (interpreter, default python3), DPONE_NEWEST_VENV (venv path; default a new
# temporary folder, removed afterwards), DPONE_LANE_STEP (all, install or test: scripts/lane_common.sh),
# extra arguments go to pytest.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANE=newest
LANE_VENV_VAR=DPONE_NEWEST_VENV
. scripts/lane_common.sh

#: What the lane runs: the unit tests, the suites on embedded chDB that exercise the clients (every load path,
#: the demo folder, route spellings), and the server sink suite. Suites whose cost is dpone's own logic over
#: many runs (test_target_checked_when_all_skipped: 160 s here, 45% of the lane) run in the main pytest
#: only: a newer client changes nothing of that logic, and CI has 20 minutes.
SUITES=(
  tests/unit
  tests/integration/test_clickhouse_sink_chdb.py
  tests/integration/test_transfer_paths.py
  tests/integration/test_demo_folder.py
  tests/integration/test_route_spelling.py
  tests/integration/test_clickhouse_sink_http.py
)

lane_venv
if [ "$LANE_STEP" != test ]; then
  say "pip install '.[embedded,test]' with the newest allowed releases (no constraints file)"
  lane_pip_install "the package cannot be installed with the newest releases its ranges allow" ".[embedded,test]"
  "$PY" -m pip list --format=freeze 2>/dev/null |
    grep -i -E '^(clickhouse-connect|chdb|chdb-core|apache-airflow|apache-airflow-core|apache-airflow-providers-openlineage|pydantic|pyarrow|adbc-driver-sqlite|sqlalchemy|pymssql|psycopg2-binary|click|rich)==' |
    sed 's/^/  /'
  lane_installed
fi
lane_pytest "${SUITES[@]}" "$@"
