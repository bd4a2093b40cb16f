"""Read-only commands (`checkpoints`, `guard inspect`, `replay status`) never create a checkpoint store,
nor do the commands that record on-call decisions (`guard resolve`, `guard rebaseline` without
`--adopt-target`, `replay resolve`).

A missing SQLite file, a SQLite file without the checkpoint table, and a PostgreSQL database without it are
each "no checkpoint store at ..." (exit 2), and afterwards the store is exactly as missing as before.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from airflow_provider_dpone.adapters.checkpoint_sql import CHECKPOINT_TABLE, SqlCheckpointStore
from airflow_provider_dpone.cli.main import cli

READ_ONLY = (["checkpoints"], ["guard", "inspect"], ["replay", "status"])
IDS = ["checkpoints", "guard-inspect", "replay-status"]
#: Commands that record on-call decisions about a route's history: they write, but never to a store they
#: would have to create (made afresh at a mistyped path, it said "nothing to resolve" and every read-only
#: command then saw a clean route).
DECIDING = (
    ["guard", "resolve", "--all-blocked", "--as", "not-applied", "--reason", "x"],
    ["guard", "rebaseline", "--reason", "x"],
    ["guard", "rebaseline", "--target-moved", "--reason", "x"],
    ["replay", "resolve", "--run-id", "r", "--as", "failed", "--reason", "x"],
)
DECIDING_IDS = ["guard-resolve", "guard-rebaseline", "rebaseline-target-moved", "replay-resolve"]


def manifest(tmp_path: Path, checkpoints: str = "sqlite:///state.sqlite") -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            kind: native_transfer
            name: read_only
            source:
              type: sqlite
              connection: sqlite:///source.sqlite
              table: orders
              partitioning: {{kind: day, column: order_date}}
            sink:
              type: clickhouse
              connection: chdb:///clickhouse
              table: demo.orders
              strategy: incremental_append
            checkpoints:
              connection: {checkpoints}
            """
        ),
        encoding="utf-8",
    )
    return path


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


@pytest.mark.parametrize("command", READ_ONLY + DECIDING, ids=IDS + DECIDING_IDS)
def test_missing_sqlite_file_is_refused_and_not_created(tmp_path: Path, command: list[str]) -> None:
    result = invoke(*command, str(manifest(tmp_path)))
    assert result.exit_code == 2, result.output
    assert f"error: usage_error: no checkpoint store at {tmp_path / 'state.sqlite'}" in result.stderr
    assert "not blocked" not in result.output and "no checkpoints yet" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.yaml"]


@pytest.mark.parametrize("command", READ_ONLY + DECIDING, ids=IDS + DECIDING_IDS)
def test_missing_store_with_json_is_one_json_error(tmp_path: Path, command: list[str]) -> None:
    result = invoke(*command, str(manifest(tmp_path)), "--json")
    assert result.exit_code == 2
    payload = json.loads(result.stdout)
    assert payload["error"] == "usage_error"
    assert payload["details"]["reason"] == "checkpoint_store_missing"


@pytest.mark.parametrize("command", READ_ONLY, ids=IDS)
def test_sqlite_file_without_the_table_is_refused_and_left_alone(tmp_path: Path, command: list[str]) -> None:
    state = tmp_path / "state.sqlite"
    with sqlite3.connect(state) as db:
        db.execute("CREATE TABLE unrelated (x INTEGER)")
    result = invoke(*command, str(manifest(tmp_path)))
    assert result.exit_code == 2, result.output
    assert f"no table {CHECKPOINT_TABLE}" in result.stderr
    with sqlite3.connect(state) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert tables == ["unrelated"]


def test_an_existing_empty_store_is_listed(tmp_path: Path) -> None:
    """The refusal is for a missing store only: an existing one with no checkpoint yet is an empty listing."""
    store = SqlCheckpointStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    store.ensure_schema()
    store.close()
    result = invoke("checkpoints", str(manifest(tmp_path)))
    assert result.exit_code == 0, result.output
    assert "no checkpoints yet" in result.stdout


@pytest.fixture
def empty_postgres_database(postgres_url: str) -> str:
    name = "ro_" + uuid.uuid4().hex[:12]
    engine = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return sa.engine.make_url(postgres_url).set(database=name).render_as_string(hide_password=False)


@pytest.mark.parametrize("command", READ_ONLY, ids=IDS)
def test_postgres_without_the_table_is_refused_and_not_created(
    tmp_path: Path, command: list[str], empty_postgres_database: str
) -> None:
    url = sa.engine.make_url(empty_postgres_database)
    uri = f"postgres://{url.username}:{url.password}@{url.host}:{url.port}/{url.database}"
    result = invoke(*command, str(manifest(tmp_path, "ro_state")), env={"AIRFLOW_CONN_RO_STATE": uri})
    assert result.exit_code == 2, result.output
    assert "error: usage_error: no checkpoint store at postgres connection 'ro_state'" in result.stderr
    assert f"(no table {CHECKPOINT_TABLE})" in result.stderr
    assert str(url.password) not in result.output
    engine = sa.create_engine(empty_postgres_database)
    try:
        assert not sa.inspect(engine).has_table(CHECKPOINT_TABLE)
    finally:
        engine.dispose()
