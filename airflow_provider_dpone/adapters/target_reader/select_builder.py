"""The only SQL the reader ever runs: the column-type lookup and one SELECT generated from a structured plan.

Exact functions only — ``count()``, ``countIf(isNull(c))``, ``uniqExact(c)`` (which, like SQL's
COUNT(DISTINCT), does not count NULL). Identifiers are admitted only if they are plain (checked again
here, independent of the contract) and are backquoted; literals are validated for their type here and
rendered by the sink's own literal renderer (``adapters.clickhouse.predicates``) in the bound column's
type, never taken as text from the caller: a day bound on a ``DateTime`` column is the epoch second of
UTC midnight, so the reader selects exactly the rows the sink's predicate selects (ClickHouse 18.16
compares a DateTime with a ``toDate(...)`` numerically and would count nothing).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from airflow_provider_dpone.adapters.bounds_sql import bounds_condition
from airflow_provider_dpone.adapters.clickhouse.predicates import ClickHouseBounds, literal
from airflow_provider_dpone.adapters.clickhouse.quoting import quote_string
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.target_observation import (
    IDENTIFIER_PATTERN,
    LoadIdSelector,
    ObservationMetric,
    TargetReadRequest,
    check_bound_value,
)

_IDENT_RE = re.compile(IDENTIFIER_PATTERN)


def quote_identifier(name: str) -> str:
    if not _IDENT_RE.match(name):
        raise ValueError("identifier is not a plain name")
    return f"`{name}`"


ColumnTypes = Mapping[str, str]


def render_literal(value: str, value_type: str, column_type: str | None = None) -> str:
    check_bound_value(value, value_type)
    if value_type == "integer":
        return str(int(value))
    return literal(value, value_type, column_type)


def column_types_query(target_table: str) -> str:
    """The SELECT of the target's column types (``system.columns``: 18.16 and chDB both have it)."""
    database, table = target_table.split(".", 1)
    quote_identifier(database)
    quote_identifier(table)
    return (
        "SELECT name, type FROM system.columns "
        f"WHERE database = {quote_string(database)} AND table = {quote_string(table)}"
    )


class _ReaderBounds(ClickHouseBounds):
    """The sink's ClickHouse bounds with the reader's strict identifiers and validated literals; a
    selector that would select everything or nothing is refused instead of read."""

    def __init__(self, types: ColumnTypes) -> None:
        super().__init__(types, quote=quote_identifier, render=render_literal)

    def nothing(self) -> str:
        raise ValueError("value-list bounds need values")

    def invalid(self, reason: str) -> Exception:
        return ValueError(reason)


def _bounds_predicate(bounds: PartitionBounds, types: ColumnTypes) -> str:
    if bounds.kind is BoundsKind.ALL:
        return "1"
    condition = bounds_condition(bounds, _ReaderBounds(types))
    if condition is None:
        raise ValueError("range bounds need a lower or an upper value")
    return condition


def _load_id_predicate(load_id: LoadIdSelector, types: ColumnTypes) -> str:
    value = render_literal(load_id.value, load_id.value_type, types.get(load_id.column))
    return f"{quote_identifier(load_id.column)} = {value}"


def where_clause(request: TargetReadRequest, column_types: ColumnTypes | None = None) -> str:
    """``column_types`` (name -> ClickHouse type, from :func:`column_types_query`) types the literals."""
    selector = request.selector
    types = column_types or {}
    clauses = []
    if selector.partitions:
        clauses.append(
            "(" + " OR ".join(f"({_bounds_predicate(b, types)})" for b in selector.partitions) + ")"
        )
    if selector.load_id is not None:
        clauses.append(f"({_load_id_predicate(selector.load_id, types)})")
    if not clauses:
        raise ValueError("a generation selector needs partition bounds or a load id")
    return " AND ".join(clauses)


def _metric_expression(metric: ObservationMetric, column: str | None) -> str:
    if metric is ObservationMetric.ROW_COUNT:
        return "count()"
    assert column is not None
    if metric is ObservationMetric.NULL_COUNT:
        return f"countIf(isNull({quote_identifier(column)}))"
    # 18.16 returns NULL, not 0, for uniqExact over no row (or only NULLs) of a Nullable column: read as a
    # failed query, it blocked every run of a route with an emptied generation (the source's count is 0)
    return f"ifNull(uniqExact({quote_identifier(column)}), 0)"


def build_select(
    request: TargetReadRequest, column_types: ColumnTypes | None = None
) -> tuple[str, tuple[tuple[ObservationMetric, str | None], ...]]:
    """The measuring SELECT and the (metric, column) each of its result columns holds, in order."""
    keys = request.expected_keys()
    database, table = request.target_table.split(".", 1)
    expressions = ", ".join(f"{_metric_expression(m, c)} AS m{i}" for i, (m, c) in enumerate(keys))
    sql = (
        f"SELECT {expressions} FROM {quote_identifier(database)}.{quote_identifier(table)} "
        f"WHERE {where_clause(request, column_types)}"
    )
    return sql, keys
