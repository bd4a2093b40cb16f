"""What a direct load pins of its target before its first write, and proves again before each insert and
after its last: the table is the one it pinned, its columns have the types the inserts declare, and it
holds the rows the load leaves there.

A ``direct`` load writes inside the guarded target call, for as long as the source takes to read; someone
may change the table meanwhile, and nothing looked again once the run had armed (seen on the 18.16 server,
each run exit 0):

- a column widened to a type the route accepts (``ALTER ... MODIFY COLUMN amount Decimal(18, 4)``): every
  insert declares the types read when the load began, and 18.16 does not convert a Native column of
  another type, it reads its bytes as the new type: each later row held ``amount / 100``, for good. Made
  ``Nullable`` instead, the next insert crashed the server.
- the table renamed away and created anew under its name, or truncated: the load went on into the new or
  emptied table, and the next run took the missing history for retention.

So the load reads the table's identity and row counts before it pulls its first chunk (right after
arming), its column types before each insert (one ``DESCRIBE``, ~1 ms), and all of them again after its
last insert. A difference raises inside the target call: the guard records the outcome as unknown and the
route waits for on-call, who is told what changed (``native_transfer_target_changed_during_load``).

Identity: the table's UUID where the engine has one (Atomic databases: chDB, current servers), else the
time its definition last changed (``metadata_modification_time``; 18.16 has no UUID): a rename or a
re-creation changes it, and so does any ``ALTER`` of the definition there, while truncates, deletes and
inserts do not. Rows: within the armed partitions' bounds (the whole table for ``full_refresh``) at least
what the load inserted, plus what they held before where the strategy keeps it (an append); and where the
table held rows outside those bounds before, it still holds some (a truncate before the load's first insert
leaves the armed partitions' count whole). Other writers only add rows there (fan-in routes append; a
route that deletes another source's rows stops before arming), so only a shortfall is refused. The counts
are skipped where rows may leave the table by design (``allow_target_ttl``) and on replicated engines (a
replica behind a load balancer may not have the rows yet); the identity and the types are checked there
too. chDB converts a declared type to the column's (Arrow and Native alike, measured on 26.9) and no other
process can open its path while the run holds it, so there the checks only confirm.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.quoting import TableName, quote_string
from airflow_provider_dpone.adapters.clickhouse.table_schema import TargetColumn
from airflow_provider_dpone.adapters.clickhouse.type_names import normalize_type
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

#: The engines whose row counts read right after an insert include it on any replica that answers.
_COUNTED_ENGINES = frozenset({"MergeTree"})
_NIL_UUID = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True, slots=True)
class TablePin:
    """The target as a direct load saw it: before its first write, and after its last."""

    #: the table's UUID, else when its definition last changed; ``None``: no such table
    identity: str | None
    engine: str = ""
    #: rows within the load's scope (the armed partitions' bounds, or the whole table); ``None``: not counted
    rows_within: int | None = None
    #: every row of the table, by its active parts (``None``: not counted)
    rows_total: int | None = None


@dataclass(frozen=True, slots=True)
class ChangedColumn:
    """A written column whose type is no longer the one the inserts declare (types are safe to show)."""

    column: str
    declared: str
    found: str | None


def read_pin(
    client: Client, name: TableName, scope: Sequence[str] | None, *, count: bool, uuids: bool
) -> TablePin:
    """Read-only: the table's identity and, with ``count``, its rows within ``scope`` (conditions of
    disjoint row sets; ``None``: the whole table) and in all. ``uuids``: ``system.tables`` has ``uuid``."""
    uuid = ", toString(uuid)" if uuids else ""
    found = client.query(
        f"SELECT engine, toString(metadata_modification_time){uuid} FROM system.tables "
        f"WHERE database = {quote_string(name.database)} AND name = {quote_string(name.table)}"
    ).result_rows
    if not found:
        return TablePin(identity=None)
    engine, modified = str(found[0][0]), str(found[0][1])
    table_uuid = str(found[0][2]) if uuids else ""
    identity = f"uuid:{table_uuid}" if table_uuid and table_uuid != _NIL_UUID else f"modified:{modified}"
    if not count or engine not in _COUNTED_ENGINES:
        return TablePin(identity=identity, engine=engine)
    parts = (
        "(SELECT sum(rows) FROM system.parts WHERE database = "
        f"{quote_string(name.database)} AND table = {quote_string(name.table)} AND active)"
    )
    conditions = list(scope) if scope is not None else [None]
    within = 0
    total: int | None = None
    for index, condition in enumerate(conditions):
        where = f" WHERE {condition}" if condition is not None else ""
        extra = f", {parts}" if index == 0 else ""
        row = client.query(f"SELECT count(){extra} FROM {name.sql()}{where}").result_rows[0]
        within += int(row[0])
        if index == 0:
            total = int(row[1] or 0)
    return TablePin(identity=identity, engine=engine, rows_within=within, rows_total=total)


def has_table_uuids(client: Client) -> bool:
    """Whether this engine's ``system.tables`` has a ``uuid`` column (not 18.16)."""
    found = client.query(
        "SELECT count() FROM system.columns WHERE database = 'system' AND table = 'tables' AND name = 'uuid'"
    ).result_rows
    return bool(int(found[0][0]))


def changed_columns(declared: Mapping[str, str], found: Mapping[str, TargetColumn]) -> list[ChangedColumn]:
    """The written columns whose type in ``found`` (the table now) is not the one the inserts declare."""
    changed: list[ChangedColumn] = []
    for column, type_name in declared.items():
        now = found.get(column)
        if now is None or normalize_type(now.type_name) != normalize_type(type_name):
            changed.append(ChangedColumn(column, type_name, None if now is None else now.type_name))
    return changed


def what_changed(before: TablePin, after: TablePin, *, inserted: int, keeps_rows: bool) -> str | None:
    """Why the table after the load is not the one the load began with, or ``None``. ``inserted``: the
    rows the load wrote; ``keeps_rows``: the strategy keeps what its scope held (an append)."""
    if after.identity is None:
        return "table_dropped"
    if before.identity != after.identity:
        return "table_replaced"
    if before.rows_within is None or after.rows_within is None:
        return None  # not counted: an engine or a manifest whose rows may leave or lag
    expected = inserted + (before.rows_within if keeps_rows else 0)
    if after.rows_within < expected:
        return "rows_missing"
    if before.rows_total is not None and after.rows_total is not None:
        outside_before = before.rows_total - before.rows_within
        outside_after = after.rows_total - after.rows_within
        if outside_before > 0 and outside_after <= 0:
            return "rows_outside_emptied"
    return None


@dataclass(frozen=True, slots=True)
class LoadScope:
    """Who loads: what the error names (safe identities and counts only)."""

    route: str
    checkpoint_batch_id: str
    partitions: int


_RUNBOOK = "see `dpone runbook guard`, 'The target changed during a load'"
_BLOCKED = (
    "the run stopped inside its target call: its partitions are blocked (target_outcome_unknown) and the "
    "route's next run stops on them until on-call resolves them (`dpone guard inspect MANIFEST`)"
)


def types_changed_error(
    name: TableName, load: LoadScope, changed: Sequence[ChangedColumn], *, inserted: int, before_insert: bool
) -> DponeError:
    """The error for columns whose type changed while the load wrote them."""
    first = changed[0]
    more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
    found = first.found or "no longer there"
    when = (
        "before its next insert (an insert sent as the change was made may hold other values than the "
        "source's)"
        if before_insert
        else "after its last insert: rows inserted after the change may hold other values than the source's "
        "(ClickHouse 18.16 reads a declared type's bytes as the column's new type)"
    )
    return DponeError(
        ErrorCode.TARGET_CHANGED_DURING_LOAD,
        f"target table {name} changed while route {load.route} loaded it: column {first.column!r} is "
        f"{found}, the run's inserts declare {first.declared}{more}; found {when}",
        details={
            "table": str(name),
            "route": load.route,
            "checkpoint_batch_id": load.checkpoint_batch_id,
            "partitions": load.partitions,
            "problem": "column_types_changed",
            "column": first.column,
            "columns": [
                {"column": c.column, "declared_type": c.declared, "found_type": c.found} for c in changed
            ],
            "rows_inserted": inserted,
            "stopped_before_insert": before_insert,
        },
        hint_lines=(
            _BLOCKED,
            "find who altered the table; once its types are final, delete the armed partitions' rows (an "
            "append route; a replacing route rewrites them) and resolve them not-applied: the next run "
            "loads them in the new types",
            _RUNBOOK,
        ),
    )


_PROBLEMS = {
    "table_dropped": "it no longer exists (dropped or renamed away)",
    "table_replaced": "it was renamed, re-created or (on servers without table UUIDs) altered",
    "rows_missing": "it holds {after:,} row(s) within the armed partitions where the run leaves at least "
    "{expected:,} ({inserted:,} inserted, {kept:,} there before): it was truncated or replaced, or rows were "
    "deleted",
    "rows_outside_emptied": "the {outside:,} row(s) it held outside the armed partitions are gone: it was "
    "truncated or replaced",
}


def table_changed_error(
    name: TableName,
    load: LoadScope,
    problem: str,
    before: TablePin,
    after: TablePin,
    *,
    inserted: int,
    keeps_rows: bool,
) -> DponeError:
    """The error for a table replaced, dropped or emptied while the load wrote it (:func:`what_changed`)."""
    kept = (before.rows_within or 0) if keeps_rows else 0
    outside = (before.rows_total or 0) - (before.rows_within or 0)
    what = _PROBLEMS[problem].format(
        after=after.rows_within or 0, expected=inserted + kept, inserted=inserted, kept=kept, outside=outside
    )
    details: dict[str, object] = {
        "table": str(name),
        "route": load.route,
        "checkpoint_batch_id": load.checkpoint_batch_id,
        "partitions": load.partitions,
        "problem": problem,
        "rows_inserted": inserted,
    }
    if before.rows_within is not None and after.rows_within is not None:
        details.update(
            rows_within_before=before.rows_within,
            rows_within_after=after.rows_within,
            rows_total_before=before.rows_total,
            rows_total_after=after.rows_total,
        )
    return DponeError(
        ErrorCode.TARGET_CHANGED_DURING_LOAD,
        f"target table {name} changed while route {load.route} loaded it: {what}",
        details=details,
        hint_lines=(
            _BLOCKED,
            "find who changed the table (a table renamed away keeps its rows: look in system.tables of "
            f"database {name.database}); restore it, then count each blocked partition and resolve it as "
            "the runbook says",
            _RUNBOOK,
        ),
    )
