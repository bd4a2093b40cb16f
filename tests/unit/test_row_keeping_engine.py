"""A target whose engine keeps no rows of its own is refused with a word about a table moved away.

A DBA renamed the route's target and left a view in its place; the refusal said "let dpone create it", and
on-call dropped the view: the next run stopped on lost committed rows. A reading engine's refusal now says
the committed table may have moved and where to point the route; an engine that stores rows differently
(merging, summing) keeps its message alone.
"""

from __future__ import annotations

import pytest

from airflow_provider_dpone.adapters.clickhouse.quoting import TableName
from airflow_provider_dpone.adapters.clickhouse.target_engine import TableFacts, require_row_keeping_engine
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

NAME = TableName("demo", "orders")


@pytest.mark.parametrize("engine", ["View", "MaterializedView", "Merge", "Distributed"])
def test_a_view_in_the_targets_place_says_the_table_may_have_moved_and_not_to_drop_it(engine: str) -> None:
    with pytest.raises(DponeError) as refused:
        require_row_keeping_engine(TableFacts(engine, engine, ()), NAME)
    assert refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    hints = " ".join(refused.value.hint_lines)
    assert "do not drop the view" in hints and "point sink.table at the moved table" in hints


@pytest.mark.parametrize("engine", ["ReplacingMergeTree", "SummingMergeTree", "Memory"])
def test_an_engine_that_stores_rows_its_own_way_is_refused_without_the_moved_table_hint(engine: str) -> None:
    with pytest.raises(DponeError) as refused:
        require_row_keeping_engine(TableFacts(engine, f"{engine}() ORDER BY id", ()), NAME)
    assert refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert refused.value.hint_lines == ()


def test_a_merge_tree_target_passes() -> None:
    require_row_keeping_engine(TableFacts("MergeTree", "MergeTree ORDER BY id", ()), NAME)
