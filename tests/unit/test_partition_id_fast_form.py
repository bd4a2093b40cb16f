"""A partition ID computed the fast way is the ID every earlier release stored, for any bounds.

Partition IDs are stored in every checkpoint: an ID that changed by one byte would plan every committed
partition as new and load it again. ``partition_id_for`` writes the canonical JSON around the bounds
once per route and the bounds field by field; these tests hold it to the obvious form
(``reference_partition_id``: ``canonical_json`` of the four model dumps) and to IDs written down by hand.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.contracts import partition
from airflow_provider_dpone.contracts.partition import (
    BoundsKind,
    PartitionBounds,
    partition_id_for,
    reference_partition_id,
)
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy

ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
)

#: Any text JSON can carry, quotes, backslashes, control characters and non-BMP letters included.
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)

BOUNDS = st.builds(
    PartitionBounds,
    kind=st.sampled_from(BoundsKind),
    column=st.none() | TEXT,
    lower=st.none() | TEXT,
    upper=st.none() | TEXT,
    values=st.none() | st.lists(TEXT, max_size=4).map(tuple),
    value_type=st.sampled_from(["string", "date", "datetime", "integer"]),
    label=TEXT.filter(bool),
)

ROUTES = st.builds(
    RouteIdentity,
    source_table=TEXT.filter(bool),
    target_table=TEXT.filter(bool),
    strategy=st.sampled_from(Strategy),
)


@settings(max_examples=400, deadline=None)
@given(route=ROUTES, query_hash=TEXT, schema_hash=TEXT, bounds=BOUNDS)
def test_the_fast_partition_id_equals_the_canonical_json_digest(
    route: RouteIdentity, query_hash: str, schema_hash: str, bounds: PartitionBounds
) -> None:
    assert partition_id_for(route, query_hash, schema_hash, bounds) == reference_partition_id(
        route, query_hash, schema_hash, bounds
    )


def test_partition_ids_stored_by_earlier_releases_are_computed_again() -> None:
    """IDs computed by the release before the fast form, for a day, a list and a whole-table partition."""
    day = PartitionBounds(
        kind=BoundsKind.RANGE,
        column="order_date",
        lower="2026-11-26",
        upper="2026-11-27",
        value_type="date",
        label="2026-11-26",
    )
    listed = PartitionBounds(kind=BoundsKind.VALUES, column="region", values=("eu", 'Zoë "x"\n'), label="eu")
    whole = PartitionBounds(kind=BoundsKind.ALL, label="all")
    query_hash, schema_hash = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    assert [partition_id_for(ROUTE, query_hash, schema_hash, b) for b in (day, listed, whole)] == [
        "sha256:cfebf8921698b8362bf17a639311a497528d51c868cbd07ebfc43e1cc9344554",
        "sha256:0d7013d5d5667a9a1d2d60a0de54db1788e5d78ddd8aa6e63e0bd14ceb8b4ff4",
        "sha256:7bb5f4dedadda263821ce5970fbe719116aa9e405f305dc32babfc00ea9fa72b",
    ]


def test_every_field_of_the_bounds_is_written() -> None:
    """A field added to ``PartitionBounds`` must enter the ID: the fast form lists every one."""
    assert tuple(sorted(PartitionBounds.model_fields)) == partition._BOUNDS_KEYS


@pytest.mark.parametrize("route", [ROUTE, ROUTE.model_copy(update={"strategy": Strategy.REPLACE_PARTITION})])
def test_the_frame_of_one_route_is_not_reused_for_another(route: RouteIdentity) -> None:
    bounds = PartitionBounds(kind=BoundsKind.ALL, label="all")
    assert partition_id_for(route, "q", "s", bounds) == reference_partition_id(route, "q", "s", bounds)
    assert partition_id_for(route, "q", "s2", bounds) == reference_partition_id(route, "q", "s2", bounds)


def test_the_same_route_planned_with_other_hashes_gets_their_ids() -> None:
    """The frame of the call before is reused only for the very same route and hashes."""
    day = PartitionBounds(
        kind=BoundsKind.RANGE, column="d", lower="1", upper="2", value_type="integer", label="1"
    )
    other = ROUTE.model_copy(update={"strategy": Strategy.REPLACE_PARTITION})
    calls = [
        (ROUTE, "q1", "s1"),
        (ROUTE, "q1", "s2"),
        (ROUTE, "q2", "s2"),
        (other, "q2", "s2"),
        (ROUTE, "q2", "s2"),
    ]
    for route, query_hash, schema_hash in calls:
        expected = reference_partition_id(route, query_hash, schema_hash, day)
        assert partition_id_for(route, query_hash, schema_hash, day) == expected
