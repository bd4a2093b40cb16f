"""The generation as a reader plan: exact union of the armed partitions, refusals before extraction."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.contracts.capsule import QualityPolicy
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.runtime.quality.generation import (
    compact_bounds,
    merge_bounds,
    target_plan,
)
from airflow_provider_dpone.runtime.quality.policy import IMPLICIT_ROW_COUNT
from tests.builders import day


def test_adjacent_ranges_merge_and_gaps_stay_separate() -> None:
    merged = merge_bounds(
        [
            day("2026-01-03", "2026-01-04"),
            day("2026-01-01", "2026-01-02"),
            day("2026-01-02", "2026-01-03"),
            day("2026-01-05", "2026-01-06"),
        ]
    )
    assert [(b.lower, b.upper) for b in merged] == [
        ("2026-01-01", "2026-01-04"),
        ("2026-01-05", "2026-01-06"),
    ]


def test_integer_ranges_sort_numerically_and_value_lists_fold() -> None:
    def rng(lo: int) -> PartitionBounds:
        return PartitionBounds(
            kind=BoundsKind.RANGE,
            column="n",
            lower=str(lo),
            upper=str(lo + 10),
            value_type="integer",
            label=str(lo),
        )

    merged = merge_bounds([rng(100), rng(-10), rng(0), rng(90)])
    assert [(b.lower, b.upper) for b in merged] == [("-10", "10"), ("90", "110")]
    values = [
        PartitionBounds(kind=BoundsKind.VALUES, column="c", values=(v,), label=v) for v in ("b", "a", "b")
    ]
    (folded,) = merge_bounds(values)
    assert folded.values == ("a", "b")


def test_generation_key_does_not_depend_on_labels_or_order() -> None:
    policy = QualityPolicy(checks=(IMPLICIT_ROW_COUNT,))
    one = target_plan(
        "db.t",
        [day("2026-01-01", "2026-01-02", "d", label="x"), day("2026-01-02", "2026-01-03", "d", label="y")],
        policy,
    )
    two = target_plan(
        "db.t",
        [day("2026-01-02", "2026-01-03", "d", label="p"), day("2026-01-01", "2026-01-02", "d", label="q")],
        policy,
    )
    assert one.generation_key() == two.generation_key() and one.sha256() == two.sha256()


def test_unpartitioned_route_cannot_be_a_generation() -> None:
    with pytest.raises(DponeError) as caught:
        compact_bounds([PartitionBounds(kind=BoundsKind.ALL, label="all")])
    assert caught.value.code is ErrorCode.USAGE


def test_more_ranges_than_a_plan_holds_are_refused_as_capacity() -> None:
    gaps = [day(f"{2000 + i // 300}-01-01", f"{2000 + i // 300}-01-02") for i in range(0, 1025 * 300, 300)]
    with pytest.raises(DponeError) as caught:
        compact_bounds(gaps)
    assert caught.value.code is ErrorCode.CAPSULE_CAPACITY_EXCEEDED
