#!/usr/bin/env bash
# THE test command (README, CI): setup, throwaway services, then ruff, mypy, lint-imports, the built
# distributions (scripts/check_dist.py: build + twine check) and pytest.
#
#   scripts/test.sh                 everything
#   scripts/test.sh -k guard        extra arguments go to pytest
#
# Starts a PostgreSQL 15 cluster, a Debian clickhouse-server 18.16 and the pysqlbridge TDS emulator on free
# loopback ports (scripts/services/local_services.py), exports DPONE_TEST_* for tests/conftest.py, and stops
# them on exit whatever happens. A service that cannot start fails the run unless DPONE_ALLOW_SKIP=1.
# All four checks run even if an earlier one fails; the exit code is non-zero if any failed, including
# pytest collecting no test (exit 5).
# Beside it, the newest-releases lane (scripts/newest_lane.sh): a fresh venv without constraints, unit tests
# and the chDB-backed suites; and the Airflow-floor lane (scripts/airflow_floor_lane.sh): a fresh venv with
# the lowest declared Airflow, the Airflow suite. Both run in the background while the main pytest runs, one
# lane after the other (install, then suites), then (a run without pytest arguments) tests/unit and the
# service-free integration suites (APART_TESTS), which the main pytest leaves out; logs after pytest's.
# Knobs: DPONE_ALLOW_SKIP=1 (local runs), DPONE_TEST_TIMEOUT (per-test seconds, default 600),
# DPONE_NEWEST_LANE=0 and DPONE_FLOOR_LANE=0 (skip the newest / the Airflow-floor lane on a local run;
# ignored when CI=true), and those of
# scripts/setup.sh (DPONE_PYTHON, DPONE_VENV, DPONE_SKIP_APT).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { printf '[test] %s\n' "$*"; }
T0=$(date +%s)

bash scripts/setup.sh

VENV="${DPONE_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
export PATH="$VENV/bin:$PATH"
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
unset PYTHONPATH

SVC_DIR="$(mktemp -d "${TMPDIR:-/tmp}/dpone-services.XXXXXX")"
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [ "$(type -t stop_lane_installs)" = function ] && stop_lane_installs
  "$PY" scripts/services/local_services.py down --dir "$SVC_DIR" >/dev/null || true
  rm -rf -- "$SVC_DIR"
  exit "$rc"
}
# Each check runs as a job in its own process group, so a signal to this script stops it at once (bash
# would otherwise wait for a foreground command to finish before running a trap), then cleanup runs.
job=""
run_job() {
  local rc=0
  set -m
  "$@" </dev/null &
  job=$!
  set +m
  wait "$job" || rc=$?
  job=""
  return "$rc"
}
on_signal() {
  local pid
  for pid in $job; do
    kill -TERM -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  exit "$1"
}
trap cleanup EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

say "starting services"
if ! "$PY" scripts/services/local_services.py up --dir "$SVC_DIR" --env-file "$SVC_DIR/env.sh"; then
  if [ "${DPONE_ALLOW_SKIP:-0}" = 1 ]; then
    say "WARNING: a service did not start; DPONE_ALLOW_SKIP=1, so its tests will be skipped"
  else
    say "FAILED: a service did not start (see above). DPONE_ALLOW_SKIP=1 skips its tests on a local run."
    exit 1
  fi
fi
set -a
# shellcheck disable=SC1091
. "$SVC_DIR/env.sh"
set +a
# The fixtures must use these services, never start their own copies; only the fault tests' private
# clickhouse-server (the private_clickhouse fixture, killed or stopped by its test) is started per test.
export DPONE_TEST_AUTOSTART=0 DPONE_TEST_PRIVATE_CLICKHOUSE=1

failed=()
step() {
  local name=$1
  shift
  local t rc=0
  t=$(date +%s)
  say "== $name: $*"
  run_job "$@" || rc=$?
  say "== $name: exit $rc in $(($(date +%s) - t))s"
  if [ "$rc" -ne 0 ]; then
    failed+=("$name")
  fi
  return 0
}

step ruff ruff check .
step mypy mypy
step lint-imports lint-imports --no-cache --no-logo
# the sdist and wheel an index user would get: build, `twine check --strict`, contents and metadata
step dist "$PY" scripts/check_dist.py
# The lanes run in the background while pytest runs, one after the other (each builds the package from this
# tree; one lane at a time beside pytest keeps the load at two heavy processes on two cores): install, then
# its suites, each lane into its own logs (scripts/lane_common.sh: DPONE_LANE_STEP). One row per lane: its
# script, the variable naming its venv, the knob that skips it on a local run, its step name.
declare -A LANE_SCRIPT=([newest]=scripts/newest_lane.sh [floor]=scripts/airflow_floor_lane.sh)
declare -A LANE_VENV=([newest]=DPONE_NEWEST_VENV [floor]=DPONE_FLOOR_VENV)
declare -A LANE_KNOB=([newest]=DPONE_NEWEST_LANE [floor]=DPONE_FLOOR_LANE)
declare -A LANE_STEP_NAME=([newest]=newest [floor]=airflow-floor)
LANES_DIR="$SVC_DIR/lanes"
lanes=()
for lane in newest floor; do
  knob=${LANE_KNOB[$lane]}
  if [ "${!knob:-1}" != 0 ] || [ "${CI:-}" = true ]; then lanes+=("$lane"); fi
done
# run_lane LANE STEP: the lane's script for one DPONE_LANE_STEP, with its venv under LANES_DIR
run_lane() { env DPONE_LANE_STEP="$2" "${LANE_VENV[$1]}=$LANES_DIR/$1/venv" bash "${LANE_SCRIPT[$1]}"; }
# The whole suite (no pytest arguments): tests/unit and the integration suites that need no service (chDB and
# SQLite in their own folders) run in the background too, after the lanes (a second pytest process on the
# core the lanes used), and the main pytest leaves them out. Two processes also halve the embedded engine's
# threads: each chDB folder a test opens leaves ~30 threads in its process, and one process running every
# suite reached chDB's 10,000 ("no free thread", stop 43). The SIGKILL chaos suite and the other
# service-free suites of the main process joined them in stop 44: the main pytest is CI's critical path
# (883-1,064 s on one machine within two hours, against CI's 20 minutes), the apart one ends long before it.
APART_TESTS=(
  tests/unit
  tests/chaos/test_sigkill_chaos.py
  tests/integration/test_allow_flag_over_own_rows.py
  tests/integration/test_artifact_store.py
  tests/integration/test_cancellation.py
  tests/integration/test_chunk_fetch_bound.py
  tests/integration/test_clickhouse_column_encoders.py
  tests/integration/test_clickhouse_native_body.py
  tests/integration/test_clickhouse_sink_chdb.py
  tests/integration/test_daily_partitioned_target.py
  tests/integration/test_datetime_partitions_any_zone.py
  tests/integration/test_demo_folder.py
  tests/integration/test_demo_script.py
  tests/integration/test_emptied_days_come_back.py
  tests/integration/test_empty_source_said.py
  tests/integration/test_first_replacement.py
  tests/integration/test_full_refresh_without_partition_column.py
  tests/integration/test_hand_made_text_and_bytes.py
  tests/integration/test_integer_range_edges.py
  tests/integration/test_left_out_rows_as_multisets.py
  tests/integration/test_list_numbers.py
  tests/integration/test_list_spellings.py
  tests/integration/test_live_sqlite_source.py
  tests/integration/test_manifest_validate_quality.py
  tests/integration/test_overflow_modes.py
  tests/integration/test_pending_mutation_before_arming.py
  tests/integration/test_progress_display_failure.py
  tests/integration/test_proving_reads_before_arming.py
  tests/integration/test_replace_many_partitions.py
  tests/integration/test_replayed_retry_checks_the_target.py
  tests/integration/test_rewritten_by_another_route.py
  tests/integration/test_shared_target.py
  tests/integration/test_sqlite_arrow_audit.py
  tests/integration/test_sqlite_arrow_proving.py
  tests/integration/test_sqlite_arrow_read.py
  tests/integration/test_sqlite_audit_partition_values.py
  tests/integration/test_sqlite_compound_queries.py
  tests/integration/test_sqlite_declared_columns.py
  tests/integration/test_sqlite_source.py
  tests/integration/test_sqlite_view_text_columns.py
  tests/integration/test_target_reader_sigchld.py
  tests/integration/test_target_ttl.py
  tests/integration/test_target_views.py
  tests/integration/test_text_calendar_partitions.py
  tests/integration/test_text_encoding_before_arming.py
  tests/integration/test_value_audit_concurrent.py
  tests/integration/test_value_audit_memory.py
  tests/integration/test_windowed_query_replace.py
)
unit_apart=0
main_args=("$@")
main_halves=()
if [ "$#" -eq 0 ]; then
  unit_apart=1
  # The main pytest's files, in two processes one after the other (each its own half of the embedded
  # engine's threads: stop 46 ended one process at 7,700 of chDB's 10,000): the integration suites taken
  # alternately, the Airflow and chaos suites with the second half. Every test file is in exactly one of the
  # two halves or in APART_TESTS.
  mapfile -t main_files < <(ls tests/*/test_*.py | sort)
  half_one="" half_two=""
  i=0
  for file in "${main_files[@]}"; do
    for apart in "${APART_TESTS[@]}"; do
      [[ $file == "$apart" || $file == "$apart"/* ]] && continue 2
    done
    if [[ $file == tests/integration/* ]] && [ $((i++ % 2)) -eq 0 ]; then
      half_one+="$file "
    else
      half_two+="$file "
    fi
  done
  main_halves=("$half_one" "$half_two")
fi
# run_lanes: each lane's install, then (if it installed) its suites; exit codes and seconds into LANES_DIR;
# then, if apart, the unit tests (their own basetemp: two pytest processes never share one)
run_lanes() {
  local lane step rc t
  for lane in "${lanes[@]}"; do
    for step in install test; do
      t=$(date +%s)
      rc=0
      run_lane "$lane" "$step" >"$LANES_DIR/$lane.$step.log" 2>&1 || rc=$?
      echo "$rc $(($(date +%s) - t))" >"$LANES_DIR/$lane.$step.rc"
      [ "$rc" -eq 0 ] || break
    done
  done
  if [ "$unit_apart" = 1 ]; then
    t=$(date +%s)
    rc=0
    "$PY" -m pytest -ra --durations=5 --timeout="${DPONE_TEST_TIMEOUT:-600}" -p no:cacheprovider \
      --basetemp="$LANES_DIR/unit-tmp" "${APART_TESTS[@]}" >"$LANES_DIR/unit.log" 2>&1 || rc=$?
    echo "$rc $(($(date +%s) - t))" >"$LANES_DIR/unit.rc"
  fi
}
lanes_job=""
if [ "${#lanes[@]}" -gt 0 ] || [ "$unit_apart" = 1 ]; then
  mkdir -p "$LANES_DIR"
  say "== in the background while pytest runs (install, then suites; one at a time): ${lanes[*]}$([ "$unit_apart" = 1 ] && echo ' tests/unit and the service-free integration suites')"
  set -m
  run_lanes </dev/null &
  lanes_job=$!
  set +m
fi
stop_lane_installs() {
  if [ -n "$lanes_job" ]; then
    kill -TERM -- "-$lanes_job" 2>/dev/null || true
    wait "$lanes_job" 2>/dev/null || true
    lanes_job=""
  fi
}

pytest_teed() {
  "$PY" -m pytest -ra --durations=15 --timeout="${DPONE_TEST_TIMEOUT:-600}" "$@" 2>&1 | tee -a "$SVC_DIR/pytest.out"
  return "${PIPESTATUS[0]}"
}
# run_main_pytest NAME ARGS...: one main pytest process; collecting no test is a failure
run_main_pytest() {
  local name=$1 rc=0 t
  shift
  say "== $name $*"
  t=$(date +%s)
  run_job pytest_teed "$@" || rc=$?
  say "== $name: exit $rc in $(($(date +%s) - t))s"
  if [ "$rc" -eq 5 ]; then
    say "$name collected no test: that is a failure"
    failed+=("$name(no tests)")
  elif [ "$rc" -ne 0 ]; then
    failed+=("$name")
  fi
}
if [ "${#main_halves[@]}" -eq 2 ]; then
  # shellcheck disable=SC2086  # each half is a list of file paths without blanks
  run_main_pytest pytest-1 ${main_halves[0]}
  # shellcheck disable=SC2086
  run_main_pytest pytest-2 ${main_halves[1]}
else
  run_main_pytest pytest "${main_args[@]}"
fi

# The newest releases the declared ranges allow, and the lowest Airflow pyproject.toml declares: each lane's
# logs, printed whole and in order once the background job above has ended.
if [ -n "$lanes_job" ]; then
  t=$(date +%s)
  wait "$lanes_job" || true
  lanes_job=""
  say "== lanes: waited $(($(date +%s) - t))s after pytest"
fi
for lane in newest floor; do
  name=${LANE_STEP_NAME[$lane]}
  if [[ " ${lanes[*]} " != *" $lane "* ]]; then
    say "== $name: skipped (${LANE_KNOB[$lane]}=0; CI always runs it)"
    continue
  fi
  for step in install test; do
    cat "$LANES_DIR/$lane.$step.log" 2>/dev/null || true
    read -r rc secs <"$LANES_DIR/$lane.$step.rc" 2>/dev/null || { rc=missing secs=0; }
    say "== $name $step: exit $rc in ${secs}s"
    if [ "$rc" != 0 ]; then
      failed+=("$name")
      break
    fi
  done
done

if [ "$unit_apart" = 1 ]; then
  cat "$LANES_DIR/unit.log" 2>/dev/null || true
  read -r rc secs <"$LANES_DIR/unit.rc" 2>/dev/null || { rc=missing secs=0; }
  say "== pytest tests/unit and service-free suites (apart): exit $rc in ${secs}s"
  if [ "$rc" = 5 ]; then
    say "pytest apart collected no test: that is a failure"
    failed+=("pytest-unit(no tests)")
  elif [ "$rc" != 0 ]; then
    failed+=("pytest-unit")
  fi
fi

"$PY" scripts/services/local_services.py down --dir "$SVC_DIR" || true
if [ "${#failed[@]}" -gt 0 ]; then
  say "FAILED: ${failed[*]} (total $(($(date +%s) - T0))s)"
else
  say "OK: every step passed: ruff, mypy, lint-imports, dist, pytest$([ "$unit_apart" = 1 ] && echo " (three processes: the main suites in two halves, then apart)"), newest, airflow-floor (total $(($(date +%s) - T0))s)"
fi
# the main pytest processes' own closing lines last, for whoever reads the end of the log.
grep -E '^=+ .*( passed| failed| error| skipped| no tests ran).* =+$' "$SVC_DIR/pytest.out" || true
[ "${#failed[@]}" -eq 0 ]
