"""The checkpoint, capsule and reader-guard stores of one database share one engine (one pool per run).

The last store to close disposes of it; an in-memory SQLite database is never shared (each store its own).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.capsule_store import SqlCapsuleStore, SqlReaderGuardStore
from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.adapters.checkpoint_sql import engine as engines


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite'}"
    base: str = request.getfixturevalue("postgres_url")
    name = f"dpone_shared_{abs(hash(str(tmp_path))) % 10**9}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return sa.engine.make_url(base).set(database=name).render_as_string(hide_password=False)


def test_the_stores_of_one_database_share_one_engine_until_the_last_closes(url: str) -> None:
    checkpoints = SqlCheckpointStore(url)
    capsules = SqlCapsuleStore(url)
    guards = SqlReaderGuardStore(url)
    shared = checkpoints._engine
    assert capsules._engine is shared and guards._engine is shared
    checkpoints.ensure_schema()
    capsules.ensure_schema()

    checkpoints.close()
    capsules.close()
    assert guards._engine is shared and any(entry[0]() is shared for entry in engines._shared.values())
    assert guards.read("sha256:" + "00" * 32, "g") is None  # the last user still works

    guards.close()
    assert not any(entry[0]() is shared for entry in engines._shared.values())
    reopened = SqlCheckpointStore(url)
    try:
        assert reopened._engine is not shared  # a new pool after the last close
    finally:
        reopened.close()


def test_in_memory_sqlite_stores_never_share_a_database() -> None:
    first, second = SqlCheckpointStore("sqlite://"), SqlCheckpointStore("sqlite://")
    try:
        assert first._engine is not second._engine
    finally:
        first.close()
        second.close()


def test_a_store_dropped_without_close_does_not_keep_its_pool_alive(tmp_path: Path) -> None:
    import gc
    import weakref

    store = SqlCheckpointStore(f"sqlite:///{tmp_path / 'dropped.sqlite'}")
    store.ensure_schema()
    pool = weakref.ref(store._engine)
    del store
    gc.collect()
    assert pool() is None  # the registry holds engines weakly: no descriptor leaks from unclosed stores
