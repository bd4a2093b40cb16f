"""What a direct load pins of its target before its first write, and proves again before each insert and
after its last: the table is the one it pinned, its columns have the types the inserts declare, nobody
mutated it, and it holds the rows the load leaves there.

A ``direct`` load writes inside the guarded target call, for as long as the source takes to read; someone
may change the table meanwhile, and nothing looked again once the run had armed (seen on the 18.16 server,
each run exit 0):

- a column widened to a type the route accepts (``ALTER ... MODIFY COLUMN amount Decimal(18, 4)``): every
  insert declares the types read when the load began, and 18.16 does not convert a Native column of
  another type, it reads its bytes as the new type: each later row held ``amount / 100``, for good. Made
  ``Nullable`` instead, the next insert crashed the server.
- the table renamed away and created anew under its name, or truncated: the load went on into the new or
  emptied table, and the next run took the missing history for retention.
- an ``ALTER ... UPDATE`` of rows the load had inserted: identity and counts stay, 300 rows held other values
  than the source's.

So the load reads the table's identity, mutations and row counts before it pulls its first chunk (right
after arming), its column types before each insert (one ``DESCRIBE``, ~1 ms), and all of them again after
its last insert. A difference raises inside the target call: the guard records the outcome as unknown and
the route waits for on-call, who is told what changed (``native_transfer_target_changed_during_load``).

Identity: the table's UUID where the engine has one (Atomic databases: chDB, current servers), else the time
its definition last changed (``metadata_modification_time``; 18.16 has no UUID): a rename or a re-creation
changes it, and so does any ``ALTER`` of the definition there, while truncates, deletes and inserts do not.
Mutations: the ids ``system.mutations`` lists for the table (read in the same statement); an ``UPDATE`` or
``DELETE`` is a mutation, and one that appears during the load and is not the load's own delete
(``replace_partition``: its command carries dpone's tag of the table, ``statements_in_flight.delete_marker``,
and it is there right after the delete) stops it. Rows: within the armed partitions' bounds (the whole table
for ``full_refresh``) at least what the load inserted, plus what they held before where the strategy keeps it
(an append); and where the table held rows outside those bounds before, it still holds some (a truncate before
the load's first insert leaves the armed partitions' count whole). Other writers only add rows there (fan-in
routes append; a route that deletes another source's rows stops before arming), so only a shortfall is
refused. A table whose TTL deletes rows (``allow_target_ttl``) is counted too: its armed partitions are
younger than its TTL (the option's condition), so they keep every row; only the rows outside them may all
expire by design, and that check alone is skipped there. Replicated engines are not counted (a replica behind
a load balancer may not have the rows yet); the identity, the mutations and the types are checked there too.
chDB converts a declared type to the column's (Arrow and Native alike, measured on 26.9) and no other process
can open its path while the run holds it, so there the checks only confirm.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.listed_reads import listed, one_row
from airflow_provider_dpone.adapters.clickhouse.quoting import TableName, quote_string
from airflow_provider_dpone.adapters.clickhouse.table_schema import TargetColumn
from airflow_provider_dpone.adapters.clickhouse.target_engine import rows_dropping_ttl
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
    #: the ids of the table's mutations ``system.mutations`` lists (done or not)
    mutations: frozenset[str] = frozenset()
    #: the table TTL deletes rows (``target_engine.rows_dropping_ttl``: ``allow_target_ttl``)
    deleting_ttl: bool = False


@dataclass(frozen=True, slots=True)
class ChangedColumn:
    """A written column whose type is no longer the one the inserts declare (types are safe to show)."""

    column: str
    declared: str
    found: str | None


def _of_table(name: TableName) -> str:
    return f"database = {quote_string(name.database)} AND table = {quote_string(name.table)}"


def read_pin(client: Client, name: TableName, scope: Sequence[str] | None, *, uuids: bool) -> TablePin:
    """Read-only: the table's identity, mutations and TTL in one statement; on a counted engine its rows
    within ``scope`` (conditions of disjoint row sets; ``None``: the whole table) and in all. ``uuids``:
    ``system.tables`` has ``uuid``. One row (``count()`` beside ``any(...)``): an answer cut to nothing
    raises (the after-load pin "could not read" the table) instead of reading as a table dropped."""
    uuid = ", any(toString(uuid))" if uuids else ""
    found = one_row(
        client,
        "SELECT count(), any(engine), any(toString(metadata_modification_time)), any(engine_full), "
        f"(SELECT groupArray(mutation_id) FROM system.mutations WHERE {_of_table(name)}){uuid} "
        f"FROM system.tables WHERE database = {quote_string(name.database)} AND name = "
        f"{quote_string(name.table)}",
        "system.tables",
    )
    if not int(found[0]):  # a whole answer that lists no such table: dropped or renamed away
        return TablePin(identity=None)
    engine, modified, engine_full = str(found[1]), str(found[2]), str(found[3] or "")
    mutations = frozenset(str(m) for m in found[4])
    table_uuid = str(found[5]) if uuids else ""
    identity = f"uuid:{table_uuid}" if table_uuid and table_uuid != _NIL_UUID else f"modified:{modified}"
    deleting_ttl = rows_dropping_ttl(engine_full)
    if engine not in _COUNTED_ENGINES:
        return TablePin(identity=identity, engine=engine, mutations=mutations, deleting_ttl=deleting_ttl)
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
        row = one_row(client, f"SELECT count(){extra} FROM {name.sql()}{where}", "the table's count")
        within += int(row[0])
        if index == 0:
            total = int(row[1] or 0)
    return TablePin(
        identity=identity,
        engine=engine,
        rows_within=within,
        rows_total=total,
        mutations=mutations,
        deleting_ttl=deleting_ttl,
    )


def own_mutations(client: Client, name: TableName, tag: str) -> frozenset[str]:
    """Read-only: the ids of ``name``'s mutations whose command carries ``tag`` (dpone's deletes of that
    table, ``statements_in_flight.delete_marker``): read right after the load's delete, they are its own.
    One row (``count()`` beside the list): an answer cut to nothing raises instead of reading as "none"."""
    found = listed(
        client,
        f"groupArray(mutation_id) FROM system.mutations WHERE {_of_table(name)} "
        f"AND position(command, {quote_string(tag)}) > 0",
        "system.mutations",
    )
    return frozenset(str(mutation) for mutation in found)


def has_table_uuids(client: Client) -> bool:
    """Whether this engine's ``system.tables`` has a ``uuid`` column (not 18.16)."""
    found = one_row(
        client,
        "SELECT count() FROM system.columns WHERE database = 'system' AND table = 'tables' AND name = 'uuid'",
        "system.columns",
    )
    return bool(int(found[0]))


def changed_columns(declared: Mapping[str, str], found: Mapping[str, TargetColumn]) -> list[ChangedColumn]:
    """The written columns whose type in ``found`` (the table now) is not the one the inserts declare."""
    changed: list[ChangedColumn] = []
    for column, type_name in declared.items():
        now = found.get(column)
        if now is None or normalize_type(now.type_name) != normalize_type(type_name):
            changed.append(ChangedColumn(column, type_name, None if now is None else now.type_name))
    return changed


def foreign_mutations(before: TablePin, after: TablePin, own: frozenset[str] = frozenset()) -> list[str]:
    """The mutations created between the two pins that are not the load's own (``own``), sorted. One the
    server cleaned up meanwhile (it keeps the last hundred done) is no change."""
    return sorted(after.mutations - before.mutations - own)


def what_changed(
    before: TablePin,
    after: TablePin,
    *,
    inserted: int,
    keeps_rows: bool,
    own: frozenset[str] = frozenset(),
    whole_table: bool = False,
) -> str | None:
    """Why the table after the load is not the one the load began with, or ``None``. ``inserted``: the
    rows the load wrote; ``keeps_rows``: the strategy keeps what its scope held (an append); ``own``: the
    mutations of the load's own delete; ``whole_table``: the counts cover the whole table (a permit without
    bounds), whose older rows a deleting TTL may expire while the load runs: only its own rows are required."""
    if after.identity is None:
        return "table_dropped"
    if before.identity != after.identity:
        return "table_replaced"
    if foreign_mutations(before, after, own):
        return "mutated"  # an update or a delete: values or rows may differ whatever the counts say
    if before.rows_within is None or after.rows_within is None:
        return None  # not counted: an engine whose rows may lag on the replica that answers
    kept = keeps_rows and not (whole_table and before.deleting_ttl)
    expected = inserted + (before.rows_within if kept else 0)
    if after.rows_within < expected:
        return "rows_missing"
    if before.deleting_ttl:
        return None  # rows outside the armed partitions may all expire by design (a retention table)
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


#: the mutation ids an error lists (their count is given too)
_SHOWN_MUTATIONS = 10
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
    "mutated": "{mutations:,} mutation(s) (an update or a delete of its rows) began on it during the load: "
    "rows the run inserted or the armed partitions held may now hold other values than the source's, or be "
    "gone",
    "rows_missing": "it holds {after:,} row(s) within the armed partitions where the run leaves at least "
    "{expected:,} ({inserted:,} inserted, {kept:,} there before): it was truncated or replaced, or rows were "
    "deleted{ttl}",
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
    own: frozenset[str] = frozenset(),
    whole_table: bool = False,
) -> DponeError:
    """The error for a table replaced, dropped, mutated or emptied while the load wrote it
    (:func:`what_changed`, whose arguments it takes)."""
    kept = (before.rows_within or 0) if keeps_rows and not (whole_table and before.deleting_ttl) else 0
    outside = (before.rows_total or 0) - (before.rows_within or 0)
    mutations = foreign_mutations(before, after, own)
    ttl = (
        ", or its TTL deleted them (a partition older than the TTL when it arrived)"
        if before.deleting_ttl
        else ""
    )
    what = _PROBLEMS[problem].format(
        after=after.rows_within or 0,
        expected=inserted + kept,
        inserted=inserted,
        kept=kept,
        outside=outside,
        mutations=len(mutations),
        ttl=ttl,
    )
    details: dict[str, object] = {
        "table": str(name),
        "route": load.route,
        "checkpoint_batch_id": load.checkpoint_batch_id,
        "partitions": load.partitions,
        "problem": problem,
        "rows_inserted": inserted,
    }
    if mutations:  # ids the server gave (``mutation_5.txt``): where on-call finds who ran what
        details.update(mutation_ids=mutations[:_SHOWN_MUTATIONS], mutations=len(mutations))
    if before.deleting_ttl:
        details["table_ttl_deletes_rows"] = True
    if before.rows_within is not None and after.rows_within is not None:
        details.update(
            rows_within_before=before.rows_within,
            rows_within_after=after.rows_within,
            rows_total_before=before.rows_total,
            rows_total_after=after.rows_total,
        )
    todo = (
        "find who ran the mutation(s) and what they change (system.mutations of the table, by the "
        "mutation_ids in the details; wait until they are done): where they touch the armed partitions, "
        "remove the attempt's rows there (an append route; a replacing route rewrites them), resolve "
        "not-applied and run; where they touch none, count the partitions and resolve them committed (an "
        "append route; a replacing route resolves not-applied, which rewrites them)"
        if problem == "mutated"
        else "find who changed the table (a table renamed away keeps its rows: look in system.tables of "
        f"database {name.database}); restore it, then count each blocked partition and resolve it as the "
        "runbook says"
    )
    return DponeError(
        ErrorCode.TARGET_CHANGED_DURING_LOAD,
        f"target table {name} changed while route {load.route} loaded it: {what}",
        details=details,
        hint_lines=(_BLOCKED, todo, _RUNBOOK),
    )
