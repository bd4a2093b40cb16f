#!/usr/bin/env bash
# Idempotent setup of everything the test command needs:
#   - .venv in the repo root (machine's python3, 3.10+) with the project, [embedded,test] extras, pinned by
#     constraints/test.txt; skipped when nothing it depends on changed since the last successful install;
#   - Debian's clickhouse-server (18.16) and postgresql (15) when their binaries are missing (needs root).
# Knobs: DPONE_PYTHON (interpreter for a new venv), DPONE_VENV (venv path), DPONE_SKIP_APT=1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${DPONE_VENV:-$ROOT/.venv}"
PYTHON="${DPONE_PYTHON:-python3}"
CONSTRAINTS="$ROOT/constraints/test.txt"
STAMP="$VENV/.dpone-setup.sha256"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore

say() { printf '[setup] %s\n' "$*"; }
# pip, minus one line per package for index locations a machine-wide pip.conf may name but that do not exist.
pip_quiet() {
  local rc
  set +e
  "$PY" -m pip "$@" 2>&1 | grep -v -E "^WARNING: Location '.*' is ignored: it is neither a file nor a directory\.$"
  rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }
now() { date +%s; }
T0=$(now)

# --- Debian services -------------------------------------------------------------------------------------
have_clickhouse() {
  command -v clickhouse-server >/dev/null 2>&1 || [ -x /usr/sbin/clickhouse-server ] || [ -x /usr/bin/clickhouse ]
}
have_postgres() {
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null 2>&1
}

missing=()
have_clickhouse || missing+=(clickhouse-server)
have_postgres || missing+=(postgresql)
if [ "${#missing[@]}" -gt 0 ] && [ "${DPONE_SKIP_APT:-0}" != 1 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    say "warning: missing ${missing[*]} and not root; install them with apt-get (service tests will fail)"
  else
    say "apt-get install ${missing[*]}"
    # Keep the packages' maintainer scripts from starting system-wide servers: the tests start their own.
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
    fi
    apt_rc=0
    {
      DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    } || apt_rc=$?
    [ "$made_policy" = 1 ] && rm -f "$policy"
    [ "$apt_rc" = 0 ] || die "apt-get install ${missing[*]} failed (exit $apt_rc)"
    have_clickhouse || die "clickhouse-server still missing after apt-get install"
    have_postgres || die "PostgreSQL server binaries still missing after apt-get install"
  fi
fi

# --- Python virtualenv -----------------------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (set DPONE_PYTHON)"
  "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
    die "$PYTHON is $("$PYTHON" -V 2>&1); Python 3.10+ is required"
  say "creating $VENV with $("$PYTHON" -V 2>&1)"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"

# What the install depends on: if none of it changed, the venv is already right.
want="$(cat pyproject.toml "$CONSTRAINTS" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1) $("$PY" -V 2>&1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && "$PY" -c 'import airflow_provider_dpone' 2>/dev/null; then
  say "venv up to date ($VENV)"
else
  rm -f "$STAMP"
  say "upgrading pip"
  pip_quiet install -q --upgrade pip -c "$CONSTRAINTS"
  say "pip install -e '.[embedded,test]' -c constraints/test.txt (a fresh venv takes a few minutes)"
  t=$(now)
  pip_quiet install -q --progress-bar off -e '.[embedded,test]' -c "$CONSTRAINTS"
  say "installed in $(($(now) - t))s"
  printf '%s' "$want" >"$STAMP"
fi

say "done in $(($(now) - T0))s"
