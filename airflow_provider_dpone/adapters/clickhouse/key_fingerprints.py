"""Key fingerprints of a target table's partitions (``KeyFingerprintingSink``): what the sources compute.

One statement per batch of pairwise disjoint partitions, shaped as ``adapters/sources/key_fingerprints``
shapes the sources' (one partition: one aggregate; several, of one column: aggregated per distinct value
of the column first, those values keyed by ``multiIf(<p0>, 0, <p1>, 1, ..., -1)`` and summed up per
partition), each predicate the one the sink's counts and deletes use, in the column's own type.
``count()`` and, per key column, ``count``, ``min``, ``max`` and ``sum`` of the remainder by
``KEY_MODULUS``. Both operands of ``%`` are ``Int64``: on 18.16 an ``Int32`` modulo a ``UInt32`` literal is
taken unsigned (``toInt32(-5) % 2147483647`` is 2147483644 there, -5 on chDB and in the sources).
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.adapters.clickhouse.predicates import (
    BoundsError,
    ColumnTypes,
    adjacent_merged,
    any_of,
    predicate,
)
from airflow_provider_dpone.adapters.clickhouse.quoting import quote_identifier
from airflow_provider_dpone.contracts.key_fingerprint import KEY_MODULUS
from airflow_provider_dpone.contracts.partition import PartitionBounds

KEY_ALIAS = "dpone_k"


def _per_row(width: int) -> list[str]:
    parts = ["count() AS dpone_n"]
    for index in range(width):
        value = f"dpone_v{index}"
        parts += [
            f"count({value}) AS dpone_c{index}",
            f"min({value}) AS dpone_l{index}",
            f"max({value}) AS dpone_h{index}",
            f"sum({value} % toInt64({KEY_MODULUS})) AS dpone_s{index}",
        ]
    return parts


def _of_groups(width: int) -> list[str]:
    parts = ["sum(dpone_n)"]
    for index in range(width):
        parts += [
            f"sum(dpone_c{index})",
            f"min(dpone_l{index})",
            f"max(dpone_h{index})",
            f"sum(dpone_s{index})",
        ]
    return parts


def statement(
    table_sql: str, bounds: Sequence[PartitionBounds], columns: Sequence[str], column_types: ColumnTypes
) -> str:
    """The batch's statement (``BoundsError`` for bounds it cannot write)."""
    values = [f"toInt64({quote_identifier(c)}) AS dpone_v{i}" for i, c in enumerate(columns)]
    if len(bounds) == 1:
        condition = predicate(bounds[0], column_types)
        where = f" WHERE {condition}" if condition is not None else ""
        return (
            f"SELECT 0, {', '.join(_per_row(len(columns)))} "
            f"FROM (SELECT {', '.join(values) or '0 AS dpone_none'} FROM {table_sql}{where})"
        )
    names = {b.column for b in bounds}
    if len(names) != 1 or None in names:
        raise BoundsError("a fingerprint batch spans several columns")
    column = quote_identifier(str(bounds[0].column))
    conditions: list[str] = []
    for index, one in enumerate(bounds):
        condition = predicate(one, column_types)
        if condition is None:
            raise BoundsError("a batch of several partitions holds the whole table")
        conditions += [f"({condition})", str(index)]
    union = any_of(adjacent_merged(bounds), column_types)
    named = ", ".join(
        ["dpone_n", *(f"dpone_{part}{i}" for i in range(len(columns)) for part in ("c", "l", "h", "s"))]
    )
    return (
        f"SELECT {KEY_ALIAS}, {', '.join(_of_groups(len(columns)))} "
        f"FROM (SELECT multiIf({', '.join(conditions)}, -1) AS {KEY_ALIAS}, {named} "
        f"FROM (SELECT {column}, {', '.join(_per_row(len(columns)))} "
        f"FROM (SELECT {', '.join([column, *values])} FROM {table_sql} WHERE {union}) "
        f"GROUP BY {column})) "
        f"GROUP BY {KEY_ALIAS}"
    )
