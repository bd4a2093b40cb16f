"""A PostgreSQL store run by a role that writes rows but owns no table, or whose search_path changed.

Real PostgreSQL, real roles. Red before: ``ensure_schema`` issued ``CREATE TABLE/INDEX IF NOT EXISTS`` on
every open, whose privileges PostgreSQL checks before it looks, so a role with only row grants (tables made
by an admin, a store restored with ``--no-owner``, another team's or on-call's role) failed every run and
every ``guard resolve`` (``checkpoint_store_failed``); a per-user schema put before ``public`` got a second,
empty store; and a store copied without its id sequence took ids below its rows, so a resolution
"succeeded" under an id that was not the latest.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.capsule_store.capsule_store import SqlCapsuleStore
from airflow_provider_dpone.adapters.checkpoint_sql import DEFINITIONS_TABLE, SqlCheckpointStore
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.read_definition import ReadDefinition
from tests.integration.test_checkpoint_store import ROUTE, checkpoint

pytestmark = pytest.mark.usefixtures("postgres_url")


@contextmanager
def _database_and_role(postgres_url: str, prefix: str) -> Iterator[tuple[sa.engine.URL, str]]:
    """A fresh database and a login role, both dropped afterwards."""
    base = sa.engine.make_url(postgres_url)
    name, role = "roles_" + uuid.uuid4().hex[:10], prefix + uuid.uuid4().hex[:10]
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
            conn.execute(sa.text(f"CREATE ROLE {role} LOGIN PASSWORD 'pw-{role}'"))
        yield base.set(database=name), role
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            conn.execute(sa.text(f"DROP ROLE IF EXISTS {role}"))
        admin.dispose()


def _as_owner(url: sa.engine.URL, *statements: str) -> None:
    owner = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with owner.connect() as conn:
            for statement in statements:
                conn.execute(sa.text(statement))
    finally:
        owner.dispose()


@pytest.fixture
def owned_store(postgres_url: str) -> Iterator[tuple[sa.engine.URL, str]]:
    """A fresh database whose store tables the admin made, and a role that may only write their rows."""
    with _database_and_role(postgres_url, "dml_") as (url, role):
        for store in (SqlCheckpointStore(url), SqlCapsuleStore(url)):
            try:
                store.ensure_schema()
            finally:
                store.close()
        _as_owner(
            url,
            f'GRANT CONNECT ON DATABASE "{url.database}" TO {role}',
            f"GRANT USAGE ON SCHEMA public TO {role}",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
            f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}",  # the guide's grants, no more
        )
        yield url, role


def _as(url: sa.engine.URL, role: str) -> str:
    return url.set(username=role, password=f"pw-{role}").render_as_string(hide_password=False)


def test_a_role_that_owns_no_table_writes_and_reads_checkpoints_and_capsules(
    owned_store: tuple[sa.engine.URL, str],
) -> None:
    url, role = owned_store
    with SqlCheckpointStore(_as(url, role)) as store:
        store.ensure_schema()
        store.write_batch([checkpoint("a"), checkpoint("b")])
        assert sorted(c.bounds.label for c in store.list_latest(ROUTE)) == ["a", "b"]
    capsules = SqlCapsuleStore(_as(url, role))
    try:
        capsules.ensure_schema()
    finally:
        capsules.close()


def test_a_role_that_owns_no_table_is_told_the_definitions_table_of_this_release_is_missing(
    owned_store: tuple[sa.engine.URL, str],
) -> None:
    """A store an earlier release made lacks ``dpone_route_definitions``; a role with row grants only cannot
    create it. The failure names the table and what to do, nothing is written; once the owner made it (any
    dpone command through the owner's role) and granted it, the role keeps and reads definitions."""
    url, role = owned_store
    _as_owner(url, f"DROP TABLE {DEFINITIONS_TABLE}")

    with SqlCheckpointStore(_as(url, role)) as store, pytest.raises(DponeError) as stopped:
        store.ensure_schema()

    error = stopped.value
    assert error.code is ErrorCode.CHECKPOINT_STORE_FAILED
    assert error.details["table"] == DEFINITIONS_TABLE and error.details["cause"] == "InsufficientPrivilege"
    assert DEFINITIONS_TABLE in error.safe_message and any("owner" in line for line in error.hint_lines)
    with SqlCheckpointStore(url) as owner:
        owner.ensure_schema()
    _as_owner(url, f"GRANT SELECT, INSERT ON {DEFINITIONS_TABLE} TO {role}")
    definition = ReadDefinition(source_type="sqlite", table="main.ev", query="SELECT 1")
    with SqlCheckpointStore(_as(url, role)) as store:
        store.ensure_schema()
        store.record_definition(ROUTE, definition)
        assert store.read_definitions(ROUTE, [definition.query_hash()]) == {
            definition.query_hash(): definition
        }


def test_a_role_granted_before_the_owner_made_the_definitions_table_is_told_what_to_grant(
    owned_store: tuple[sa.engine.URL, str],
) -> None:
    """The upgrade half done: the owner's run created ``dpone_route_definitions`` after the role's grants on
    ALL TABLES were given, which do not cover it. Red before: every ``replace_partition`` run of the role
    stopped with "operation read_definitions failed on postgresql (InsufficientPrivilege)", no table, no
    grant, no word that the route is not blocked. Now reading and keeping a definition name the table and
    the grant, as ``ensure_schema``'s failure to create it does."""
    url, role = owned_store
    _as_owner(url, f"DROP TABLE {DEFINITIONS_TABLE}")
    with SqlCheckpointStore(url) as owner:
        owner.ensure_schema()  # the owner's one run after the upgrade
    definition = ReadDefinition(source_type="sqlite", table="main.ev", query="SELECT 1")

    with SqlCheckpointStore(_as(url, role)) as store:
        store.ensure_schema()  # the table is there: nothing to create
        with pytest.raises(DponeError) as reading:
            store.read_definitions(ROUTE, [definition.query_hash()])
        with pytest.raises(DponeError) as keeping:
            store.record_definition(ROUTE, definition)

    for error, needs in ((reading.value, "SELECT"), (keeping.value, "INSERT")):
        assert error.code is ErrorCode.CHECKPOINT_STORE_FAILED
        assert (
            error.details["table"] == DEFINITIONS_TABLE and error.details["cause"] == "InsufficientPrivilege"
        )
        assert f"may not {needs} on table {DEFINITIONS_TABLE}" in error.safe_message
        hints = " ".join(error.hint_lines)
        assert f"SELECT and INSERT on {DEFINITIONS_TABLE}" in hints and "not blocked" in hints
        assert "SELECT 1" not in error.render()  # never the definition
    _as_owner(url, f"GRANT SELECT, INSERT ON {DEFINITIONS_TABLE} TO {role}")
    with SqlCheckpointStore(_as(url, role)) as store:
        store.record_definition(ROUTE, definition)
        assert store.read_definitions(ROUTE, [definition.query_hash()]) == {
            definition.query_hash(): definition
        }


def test_a_schema_put_before_public_later_finds_the_store_there_not_a_new_empty_one(
    owned_store: tuple[sa.engine.URL, str],
) -> None:
    """PostgreSQL's secure schema pattern (``CREATE SCHEMA <role> AUTHORIZATION <role>``) puts the role's
    own schema first on the default search_path."""
    url, role = owned_store
    with SqlCheckpointStore(url) as admin_store:
        admin_store.write_batch([checkpoint("committed-before")])
    _as_owner(url, f"CREATE SCHEMA {role} AUTHORIZATION {role}")

    with SqlCheckpointStore(_as(url, role)) as store:
        store.ensure_schema()
        assert [c.bounds.label for c in store.list_latest(ROUTE)] == ["committed-before"]
        store.write_batch([checkpoint("after")])
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        in_own = conn.execute(
            sa.text("SELECT count(*) FROM pg_tables WHERE schemaname = :s"), {"s": role}
        ).scalar()
        in_public = conn.execute(sa.text("SELECT count(*) FROM public.dpone_partition_checkpoints")).scalar()
    engine.dispose()
    assert (in_own, in_public) == (0, 2)


@pytest.mark.parametrize("as_role", [False, True], ids=["owner", "usage-only-role"])
def test_a_store_whose_id_sequence_is_behind_its_rows_stops_before_writing(
    owned_store: tuple[sa.engine.URL, str], as_role: bool
) -> None:
    """Red with the second form of the check for a role with the guide's grants (USAGE on the sequence):
    reading the sequence's row needs SELECT, so the check let it pass into a UniqueViolation."""
    url, role = owned_store
    with SqlCheckpointStore(url) as store:
        store.write_batch([checkpoint("a"), checkpoint("b"), checkpoint("c")])
    # a logical copy of the rows: the sequence starts over
    _as_owner(url, "SELECT setval(pg_get_serial_sequence('dpone_partition_checkpoints', 'id'), 1)")

    with (
        SqlCheckpointStore(_as(url, role) if as_role else url) as store,
        pytest.raises(DponeError) as stopped,
    ):
        store.ensure_schema()
    assert stopped.value.code is ErrorCode.CHECKPOINT_STORE_FAILED
    assert stopped.value.details["problem"] == "id_sequence_behind"
    assert "copied without its id sequence" in stopped.value.hint_lines[-1]


@pytest.mark.parametrize(
    "moved_on",
    [
        "SELECT setval(pg_get_serial_sequence('dpone_partition_checkpoints', 'id'), 4, false)",
        "ALTER SEQUENCE dpone_partition_checkpoints_id_seq RESTART WITH 10",
    ],
    ids=["setval-next", "restart-past"],
)
def test_a_sequence_set_to_hand_out_the_next_id_is_healthy(
    owned_store: tuple[sa.engine.URL, str], moved_on: str
) -> None:
    """Red with the first form of the check: a sequence whose next value is past the rows but not called
    yet (``setval(seq, max + 1, false)``, ``RESTART WITH``) was refused as behind."""
    url, _ = owned_store
    with SqlCheckpointStore(url) as store:
        store.write_batch([checkpoint("a"), checkpoint("b"), checkpoint("c")])
    _as_owner(url, moved_on)

    with SqlCheckpointStore(url) as store:
        store.ensure_schema()
        store.write_batch([checkpoint("d")])
        assert sorted(c.bounds.label for c in store.list_latest(ROUTE)) == ["a", "b", "c", "d"]


def test_a_missing_table_of_the_store_is_made_beside_the_checkpoint_table_not_in_a_schema_put_first(
    postgres_url: str,
) -> None:
    """The capsule tables are made when durable replay is first used: under a per-user schema they went
    there, where another role (on-call's) does not look."""
    with _database_and_role(postgres_url, "late_") as (url, role):
        with SqlCheckpointStore(url) as store:
            store.ensure_schema()
        _as_owner(
            url,
            f"GRANT USAGE, CREATE ON SCHEMA public TO {role}",
            f"CREATE SCHEMA {role} AUTHORIZATION {role}",
        )
        capsules = SqlCapsuleStore(_as(url, role))
        try:
            capsules.ensure_schema()
        finally:
            capsules.close()
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            where = conn.execute(
                sa.text("SELECT DISTINCT schemaname FROM pg_tables WHERE tablename LIKE 'dpone_%'")
            ).scalars()
            assert sorted(where) == ["public"]
        engine.dispose()


def test_a_store_this_role_cannot_see_is_not_absent(postgres_url: str) -> None:
    """The sensor's "does the store exist yet" look: a role without USAGE on the store's schema sees no
    table on its search_path; red before, that was "nothing has run yet", and a blocked route was "clear"."""
    from pydantic import SecretStr

    from airflow_provider_dpone.adapters.checkpoint_sql.presence import checkpoint_store_absent
    from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind

    with _database_and_role(postgres_url, "blind_") as (url, role):

        def endpoint(as_url: str) -> EndpointDescriptor:
            parsed = sa.engine.make_url(as_url)
            return EndpointDescriptor(
                name="state",
                kind=EndpointKind.POSTGRES,
                host=parsed.host,
                port=parsed.port,
                database=parsed.database,
                user=parsed.username,
                password=SecretStr(parsed.password) if parsed.password else None,
            )

        assert checkpoint_store_absent(endpoint(url.render_as_string(hide_password=False)))
        store = SqlCheckpointStore(url)
        try:
            store.ensure_schema()
        finally:
            store.close()
        _as_owner(
            url,
            f'GRANT CONNECT ON DATABASE "{url.database}" TO {role}',
            "REVOKE ALL ON SCHEMA public FROM PUBLIC",
            f"REVOKE ALL ON SCHEMA public FROM {role}",
        )
        assert not checkpoint_store_absent(endpoint(_as(url, role)))
        assert not checkpoint_store_absent(endpoint(url.render_as_string(hide_password=False)))
