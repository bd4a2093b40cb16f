"""Airflow-level test support: a private AIRFLOW_HOME, and helpers that run Airflow in fresh processes.

Airflow reads ``AIRFLOW_HOME`` when it is first imported and writes ``airflow.cfg`` there, so this
module points it at a temporary folder before any test here imports Airflow (unless the caller chose
one). Everything that needs a metadata database or a DAG folder runs in a subprocess with its own
``AIRFLOW_HOME``: nothing leaks between tests, and chDB's one-path-per-process rule cannot bite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DAGS_EXAMPLES = REPO_ROOT / "dags_examples"
AIRFLOW_BIN = Path(sys.executable).parent / "airflow"

if "airflow" not in sys.modules and "AIRFLOW_HOME" not in os.environ:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="dpone-airflow-home-")
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


def airflow_env(home: Path, **extra: str) -> dict[str, str]:
    """Environment for an Airflow subprocess with a private home and SQLite metadata database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def run_airflow(
    args: list[str], env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AIRFLOW_BIN), *args], env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
    )


def last_json_line(stdout: str) -> Any:
    """Airflow's CLI logs to stdout too: the JSON answer is the last line that parses."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith(("[", "{")):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise AssertionError(f"no JSON line in output:\n{stdout[-3000:]}")


@pytest.fixture(scope="session")
def migrated_airflow_home() -> Iterator[Path]:
    """A private AIRFLOW_HOME whose SQLite metadata database is migrated (about 4 s, once)."""
    home = Path(tempfile.mkdtemp(prefix="dpone-airflow-db-"))
    result = run_airflow(["db", "migrate"], airflow_env(home), timeout=300)
    assert result.returncode == 0, (
        f"airflow db migrate failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    yield home
