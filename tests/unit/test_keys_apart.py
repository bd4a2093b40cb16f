"""``keys_apart``: where ``--allow-nonempty-target`` meets as many rows as the source holds, whether the
target's key values there lie outside the source's, so that none of its rows is one of the source's (ADR
0092). Seen: the other shard of one generator, as many rows a day with other ids, was refused for every day.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

from airflow_provider_dpone.contracts.key_fingerprint import ColumnDigest, KeyFingerprint
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from airflow_provider_dpone.runtime.key_fingerprint import (
    NO_KEY_COLUMN,
    key_candidates,
    key_ranges,
    keys_apart,
)

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64"),
        ColumnSpec(name="order_date", clickhouse_type="Date"),
    )
)


def day(offset: int) -> PartitionBounds:
    first = date(2026, 11, 27) + timedelta(days=offset)
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column="order_date",
        lower=first.isoformat(),
        upper=(first + timedelta(days=1)).isoformat(),
        value_type="date",
        label=f"order_date={first.isoformat()}",
    )


def ids(low: int | None, high: int | None, rows: int = 300, nulls: int = 0) -> KeyFingerprint:
    values = 0 if low is None else rows - nulls
    return KeyFingerprint(
        rows=rows, columns=(ColumnDigest(values=values, minimum=low, maximum=high, residue_sum=low),)
    )


class Side:
    """A source or a sink holding one fingerprint per partition label."""

    def __init__(self, found: dict[str, KeyFingerprint]) -> None:
        self.found = found

    def describe(self) -> TableSchema:
        return SCHEMA

    def target_schema(self, table: str) -> TableSchema:
        return SCHEMA

    def key_fingerprints(self, *args: object) -> list[KeyFingerprint]:
        bounds: Sequence[PartitionBounds] = args[-2]  # type: ignore[assignment]
        return [self.found[b.label] for b in bounds]


def candidates(source: object) -> list[str]:
    return key_candidates(["id"], ["order_date", "id"], "order_date")


def test_only_a_partition_whose_target_ids_lie_outside_the_sources_is_apart() -> None:
    days = [day(i) for i in range(5)]
    source = Side({b.label: ids(1 + 300 * i, 300 * (i + 1)) for i, b in enumerate(days)})
    target = Side(
        {
            days[0].label: ids(5_000_001, 5_000_300),  # another shard's ids: apart
            days[1].label: ids(301, 600),  # this source's own ids: not
            days[2].label: ids(100, 5_000_900),  # around the source's range: may hold some of them
            days[3].label: ids(None, None),  # no key value at all: nothing proven
            days[4].label: ids(5_000_001, 5_000_300, nulls=1),  # a row without one may be the source's
        }
    )

    apart = keys_apart(days, source, target, "demo.orders", candidates)  # type: ignore[arg-type]

    assert apart == {days[0]}


def test_nothing_is_apart_where_keys_cannot_be_fingerprinted() -> None:
    days = [day(0)]

    class Counting(Side):
        key_fingerprints = None  # type: ignore[assignment]

    source = Counting({})
    target = Side({days[0].label: ids(5_000_001, 5_000_300)})

    assert keys_apart(days, source, target, "demo.orders", candidates) == set()  # type: ignore[arg-type]


def test_key_ranges_names_the_columns_compared_or_why_none_could_be() -> None:
    """Where counts differ, ``--allow-nonempty-target`` stops unless the ranges are apart, but only where
    keys were compared at all: a route without an integer key keeps counts alone (ADR 0092)."""
    days = [day(0), day(1)]
    source = Side({days[0].label: ids(1, 300), days[1].label: ids(301, 600)})
    target = Side(
        {days[0].label: ids(5_000_001, 5_000_100, rows=100), days[1].label: ids(301, 550, rows=250)}
    )

    compared = key_ranges(days, source, target, "demo.orders", candidates)  # type: ignore[arg-type]

    assert compared.columns == ("id",) and compared.unusable is None
    assert compared.apart == {days[0]}

    def no_key(source: object) -> list[str]:
        return ["customer"]

    unusable = key_ranges(days, source, target, "demo.orders", no_key)  # type: ignore[arg-type]

    assert unusable.columns == () and unusable.apart == frozenset() and unusable.unusable == NO_KEY_COLUMN
