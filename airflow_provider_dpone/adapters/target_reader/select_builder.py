"""The only SQL the reader ever runs: one SELECT generated from a structured plan.

Exact functions only — ``count()``, ``countIf(isNull(c))``, ``uniqExact(c)`` (which, like SQL's
COUNT(DISTINCT), does not count NULL). Identifiers are admitted only if they are plain (checked again
here, independent of the contract) and are backquoted; literals are validated for their type and
rendered by this module, never taken as text from the caller.
"""

from __future__ import annotations

import re

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


def render_literal(value: str, value_type: str) -> str:
    check_bound_value(value, value_type)
    if value_type == "integer":
        return str(int(value))
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    if value_type == "date":
        return f"toDate('{escaped}')"
    if value_type == "datetime":
        return f"toDateTime('{escaped.replace('T', ' ')}', 'UTC')"
    return f"'{escaped}'"


def _bounds_predicate(bounds: PartitionBounds) -> str:
    if bounds.kind is BoundsKind.ALL:
        return "1"
    assert bounds.column is not None
    column = quote_identifier(bounds.column)
    if bounds.kind is BoundsKind.RANGE:
        parts = []
        if bounds.lower is not None:
            parts.append(f"{column} >= {render_literal(bounds.lower, bounds.value_type)}")
        if bounds.upper is not None:
            parts.append(f"{column} < {render_literal(bounds.upper, bounds.value_type)}")
        if not parts:
            raise ValueError("range bounds need a lower or an upper value")
        return " AND ".join(parts)
    values = bounds.values or ()
    if not values:
        raise ValueError("value-list bounds need values")
    return f"{column} IN ({', '.join(render_literal(v, bounds.value_type) for v in values)})"


def _load_id_predicate(load_id: LoadIdSelector) -> str:
    return f"{quote_identifier(load_id.column)} = {render_literal(load_id.value, load_id.value_type)}"


def where_clause(request: TargetReadRequest) -> str:
    selector = request.selector
    clauses = []
    if selector.partitions:
        clauses.append("(" + " OR ".join(f"({_bounds_predicate(b)})" for b in selector.partitions) + ")")
    if selector.load_id is not None:
        clauses.append(f"({_load_id_predicate(selector.load_id)})")
    if not clauses:
        raise ValueError("a generation selector needs partition bounds or a load id")
    return " AND ".join(clauses)


def _metric_expression(metric: ObservationMetric, column: str | None) -> str:
    if metric is ObservationMetric.ROW_COUNT:
        return "count()"
    assert column is not None
    if metric is ObservationMetric.NULL_COUNT:
        return f"countIf(isNull({quote_identifier(column)}))"
    return f"uniqExact({quote_identifier(column)})"


def build_select(request: TargetReadRequest) -> tuple[str, tuple[tuple[ObservationMetric, str | None], ...]]:
    """The measuring SELECT and the (metric, column) each of its result columns holds, in order."""
    keys = request.expected_keys()
    database, table = request.target_table.split(".", 1)
    expressions = ", ".join(f"{_metric_expression(m, c)} AS m{i}" for i, (m, c) in enumerate(keys))
    sql = (
        f"SELECT {expressions} FROM {quote_identifier(database)}.{quote_identifier(table)} "
        f"WHERE {where_clause(request)}"
    )
    return sql, keys
