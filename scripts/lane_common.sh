# Shared by the dependency lanes (scripts/newest_lane.sh, scripts/airflow_floor_lane.sh); sourced, not run.
#
# A lane is two steps: install the package into a fresh venv of its own, then run its suites against that
# venv. DPONE_LANE_STEP picks what one invocation does:
#   all      (default) both, in a temporary venv removed afterwards (or at the lane's *_VENV path);
#   install  only the install, into the lane's *_VENV path (required), marked complete when it succeeded;
#   test     only the suites, against the venv an `install` step completed at the lane's *_VENV path.
# scripts/test.sh runs both lanes in the background while the main pytest runs, one after the other
# (install, then test): the lanes add no wall time after the main pytest.
#
# The caller sets LANE (its log prefix) and LANE_VENV_VAR (the name of its *_VENV variable) first.

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
unset PIP_CONSTRAINT PIP_REQUIREMENT
PYTHON="${DPONE_PYTHON:-python3}"
LANE_STEP="${DPONE_LANE_STEP:-all}"
LANE_MARK=".dpone-lane-installed"
say() { printf '[%s] %s\n' "$LANE" "$*"; }
now() { date +%s; }
T0=$(now)

case "$LANE_STEP" in
  all | install | test) ;;
  *)
    say "FAILED: DPONE_LANE_STEP=$LANE_STEP (expected all, install or test)"
    exit 2
    ;;
esac
if [ "$LANE_STEP" != all ] && [ -z "${!LANE_VENV_VAR:-}" ]; then
  say "FAILED: DPONE_LANE_STEP=$LANE_STEP needs $LANE_VENV_VAR (the venv the install step makes)"
  exit 2
fi

# lane_venv: sets VENV and PY. For `all` and `install`, a fresh venv (the given path is emptied first);
# for `test`, the completed one at the given path.
lane_venv() {
  made_venv=0
  if [ -n "${!LANE_VENV_VAR:-}" ]; then
    VENV="${!LANE_VENV_VAR}"
  else
    VENV="$(mktemp -d "${TMPDIR:-/tmp}/dpone-$LANE.XXXXXX")/venv"
    made_venv=1
  fi
  PY="$VENV/bin/python"
  if [ "$LANE_STEP" = test ]; then
    if [ ! -f "$VENV/$LANE_MARK" ]; then
      say "FAILED: no completed install at $VENV (run DPONE_LANE_STEP=install first)"
      exit 1
    fi
    return 0
  fi
  [ "$made_venv" = 1 ] || rm -rf -- "$VENV"
  # ~1 GB of files (Airflow, chDB): removed in the background so the lane's time is install + tests only
  trap '[ "$made_venv" = 1 ] && (rm -rf -- "$(dirname "$VENV")" </dev/null >/dev/null 2>&1 &) || true' EXIT
  mkdir -p "$(dirname "$VENV")"
  say "fresh venv $VENV ($("$PYTHON" -V 2>&1))"
  "$PYTHON" -m venv "$VENV"
}

# lane_pip_install WHAT_FAILED ARGS...: pip itself, then ARGS; the log's tail and WHAT_FAILED on failure.
lane_pip_install() {
  local failure=$1 log t
  shift
  log="$(dirname "$VENV")/pip-$LANE.log"
  t=$(now)
  if ! { "$PY" -m pip install -q --upgrade pip && "$PY" -m pip install -q --progress-bar off "$@"; } >"$log" 2>&1; then
    grep -v -E "^WARNING: Location '.*' is ignored" "$log" | tail -n 40 >&2 || true
    say "FAILED: $failure"
    exit 1
  fi
  say "installed in $(($(now) - t))s:"
}

# lane_installed: marks the venv complete; an `install` step ends here.
lane_installed() {
  touch "$VENV/$LANE_MARK"
  if [ "$LANE_STEP" = install ]; then
    say "install done in $(($(now) - T0))s; the suites run with DPONE_LANE_STEP=test"
    exit 0
  fi
}

# lane_pytest ARGS...: the suites, from the repository (tests import it) but against the venv's packages.
lane_pytest() {
  local rc=0
  say "pytest $*"
  # its own temporary folder, inside its venv: the two lanes' suites run at the same time (scripts/test.sh)
  PATH="$VENV/bin:$PATH" "$PY" -m pytest -q -p no:cacheprovider --timeout="${DPONE_TEST_TIMEOUT:-600}" \
    --basetemp="$VENV/pytest-tmp" "$@" || rc=$?
  if [ "$rc" -eq 5 ]; then
    say "FAILED: pytest collected no test"
    rc=1
  fi
  say "exit $rc in $(($(now) - T0))s"
  exit "$rc"
}
