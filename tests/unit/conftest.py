"""Store backends for the guard tests: in-memory, SQLite and PostgreSQL (the latter two are real)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.doubles import InMemoryCheckpointStore


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def checkpoint_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """The inner store the fault-injecting wrapper sits on. Each test sees an empty store."""
    if request.param == "memory":
        yield InMemoryCheckpointStore()
        return
    from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    else:
        base = request.getfixturevalue("postgres_url")
        url = _fresh_postgres_database(base)
    store = SqlCheckpointStore(url)
    store.ensure_schema()
    yield store
    store.close()


def _fresh_postgres_database(base_url: str) -> str:
    import sqlalchemy as sa

    name = "guard_" + uuid.uuid4().hex[:12]
    engine = sa.create_engine(base_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return sa.engine.make_url(base_url).set(database=name).render_as_string(hide_password=False)
