"""Target table DDL and the column compatibility rule.

Compatibility (checked before any row is written): every source column must exist in the target with the
same type, after normalizing how ClickHouse spells types (``Decimal(12,2)`` vs ``Decimal(12, 2)``,
``Decimal32(2)`` vs ``Decimal(9, 2)``), or a type that holds every value of it exactly: a non-nullable
source column may land in a ``Nullable`` target column, an integer in a wider one, a ``Decimal`` in one with
at least its digits on both sides of the point, ``Float32`` in ``Float64`` (``type_names.holds_every_value``;
hand-made tables often declare ``Int64`` for SQL Server's ``int``). A nullable source column may land in a
column without ``Nullable`` only once a run proved the rows it moves hold no NULL there
(``columns_refusing_null``, ``runtime/null_free.py``). A ``String`` column may also be declared
``LowCardinality(String)`` (or ``LowCardinality(Nullable(String))``): a dictionary encoding of the same
values (``type_names.stored_type``). Every load declares the target's own types, so a value is written as
the target column's type (``arrow_insert``, ``native_body``, clickhouse-connect's encoders).
``MATERIALIZED`` and ``ALIAS`` columns cannot be inserted, so they never satisfy a source column. A column
the route writes may not have a TTL unless the manifest allows target TTLs: once it expires, merges reset the
loaded values to the column's default (a table TTL that deletes rows is refused with the engine,
``target_engine``).

A target column the route does not write is filled in every new row by the engine. It is accepted when
its owner said how (a ``DEFAULT``, ``MATERIALIZED``, ``ALIAS`` or ``EPHEMERAL`` expression) or when it is
``Nullable`` (the row reads NULL: no value). A non-nullable column without an expression would take its
type's zero value (``''``, ``0``, ``1970-01-01``), indistinguishable from a real one: refused. Seen: the
demo's manifest pinned ``source.columns`` without ``customer``, and every new row read ``customer = ''``
beside rows whose customer was 'Acme GmbH' in the source (exit 0).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_dpone.adapters.clickhouse.quoting import TableName, quote_identifier
from airflow_provider_dpone.adapters.clickhouse.type_names import holds_every_value, stored_type
from airflow_provider_dpone.adapters.clickhouse.type_names import normalize_type as normalize_type
from airflow_provider_dpone.contracts.schema import TableSchema

_NULLABLE = re.compile(r"^Nullable\((.*)\)$")


def holds_null(type_name: str) -> bool:
    """Whether a column of ``type_name`` holds NULL: ``Nullable(T)`` or ``LowCardinality(Nullable(String))``;
    elsewhere a NULL would be written as the type's default."""
    return _NULLABLE.match(stored_type(type_name)) is not None


def strip_nullable(type_name: str) -> str:
    match = _NULLABLE.match(type_name)
    return match.group(1) if match else type_name


@dataclass(frozen=True, slots=True)
class TargetColumn:
    name: str
    type_name: str
    default_kind: str  # '', 'DEFAULT', 'MATERIALIZED', 'ALIAS', ...
    #: the column's TTL expression ('' without one; servers before TTLs have none)
    ttl: str = ""

    @property
    def insertable(self) -> bool:
        return self.default_kind not in ("MATERIALIZED", "ALIAS", "EPHEMERAL")


@dataclass(frozen=True, slots=True)
class Incompatibility:
    """Why one source column cannot be loaded; types are schema metadata, safe to show."""

    column: str
    reason: str
    expected_type: str
    found_type: str | None


#: How a written column with a TTL is named among the incompatibilities.
COLUMN_TTL = "declared with a TTL"
#: How a written column the target does not have is named among the incompatibilities.
MISSING_FROM_TARGET = "missing from the target table"
#: What to do about it: the rows already in the target get the added column's DEFAULT (its type's zero
#: value without one), which no count shows (seen: 30,000 rows read '' where the source held 'web', exit 0).
MISSING_COLUMN_HINT = (
    "a column the source has and the target lacks: add it with the values the source holds (ALTER TABLE "
    "<table> ADD COLUMN <column> <type> DEFAULT <the source column's DEFAULT>); without that DEFAULT every "
    "row already in the target reads its type's zero value ('' or 0)",
    "where rows already loaded hold other source values than that DEFAULT, backfill them from the source "
    "(or reload those partitions) before the next run; a `dpone guard rebaseline --schema-checked` is "
    "refused until the target has the column",
)


def compatibility_problems(
    schema: TableSchema, target: Mapping[str, TargetColumn], *, allow_ttl: bool = False
) -> list[Incompatibility]:
    """Why each source column cannot be loaded into ``target`` (none: compatible). A column TTL on a written
    column is one, unless the manifest allows target TTLs (``allow_ttl``)."""
    problems: list[Incompatibility] = []
    for column in schema.columns:
        expected = column.full_type()
        found = target.get(column.name)
        if found is None or not found.insertable:
            reason = MISSING_FROM_TARGET if found is None else "not insertable in the target"
            problems.append(
                Incompatibility(column.name, reason, expected, found.type_name if found else None)
            )
            continue
        if not types_compatible(expected, found.type_name):
            problems.append(Incompatibility(column.name, "of a different type", expected, found.type_name))
        elif found.ttl and not allow_ttl:
            problems.append(
                Incompatibility(
                    column.name,
                    f"{COLUMN_TTL}: merges reset its values to the default once it expires "
                    "(a retention table: sink.options.allow_target_ttl: true)",
                    "a column without TTL",
                    found.type_name,
                )
            )
    written = {column.name for column in schema.columns}
    for name, extra in target.items():
        if name in written or extra.default_kind or holds_null(extra.type_name):
            continue
        problems.append(
            Incompatibility(
                name,
                "not written by the route and has no DEFAULT: new rows would hold its type's zero value",
                "a source column, a DEFAULT expression or Nullable",
                extra.type_name,
            )
        )
    return problems


def columns_refusing_null(schema: TableSchema, target: Mapping[str, TargetColumn]) -> list[str]:
    """The nullable source columns the target declares without ``Nullable`` but otherwise compatible: a
    run may load them once it proved the rows it moves hold no NULL there (ClickHouse best practice avoids
    ``Nullable``; SQL Server declares most columns nullable)."""
    refusing: list[str] = []
    for column in schema.columns:
        found = target.get(column.name)
        if not column.nullable or found is None or not found.insertable:
            continue
        if not holds_null(found.type_name) and types_compatible(column.clickhouse_type, found.type_name):
            refusing.append(column.name)
    return refusing


def types_compatible(source_type: str, target_type: str) -> bool:
    """Whether the target column holds every value of the source column exactly: a NULL only in a
    ``Nullable`` column (elsewhere it would become the type's default), every other value in a type that
    holds it (``type_names.holds_every_value``)."""
    source, target = normalize_type(source_type), stored_type(target_type)
    if _NULLABLE.match(source) and not _NULLABLE.match(target):
        return False
    return holds_every_value(strip_nullable(source), strip_nullable(target))


def column_list(names: Sequence[str]) -> str:
    return ", ".join(quote_identifier(n) for n in names)


def create_table_sql(
    table: TableName,
    schema: TableSchema,
    order_by: Sequence[str],
    *,
    nullable_key_setting: bool,
    if_not_exists: bool = True,
) -> str:
    """``CREATE TABLE IF NOT EXISTS`` with MergeTree (``CREATE TABLE`` with ``if_not_exists=False``).

    Nullable columns cannot be sorting-key columns on 18.16 (nor on current engines without
    ``allow_nullable_key``). Where the engine has that setting it is enabled, so the key stays usable for
    partition predicates; elsewhere a nullable key column is keyed as ``assumeNotNull(col)`` (NULLs sort
    as the type's default value; the stored values are unchanged).
    """
    columns = ", ".join(f"{quote_identifier(c.name)} {c.full_type()}" for c in schema.columns)
    nullable_keys = [name for name in order_by if schema.column(name).nullable]
    keys = []
    for name in order_by:
        if name in nullable_keys and not nullable_key_setting:
            keys.append(f"assumeNotNull({quote_identifier(name)})")
        else:
            keys.append(quote_identifier(name))
    key = f"({', '.join(keys)})" if keys else "tuple()"
    settings = " SETTINGS allow_nullable_key = 1" if nullable_keys and nullable_key_setting else ""
    create = "CREATE TABLE IF NOT EXISTS" if if_not_exists else "CREATE TABLE"
    return f"{create} {table.sql()} ({columns}) ENGINE = MergeTree ORDER BY {key}{settings}"


def create_staging_sql(
    table: TableName, schema: TableSchema, order_by: Sequence[str], *, nullable_key_setting: bool
) -> str:
    """A staging table is created exactly as :func:`create_table_sql` creates its target (same columns,
    key and settings), so that publishing can attach its parts instead of copying its rows
    (``staged_publish``); a target of any other definition is published by copying, as before."""
    return create_table_sql(
        table, schema, order_by, nullable_key_setting=nullable_key_setting, if_not_exists=False
    )
