"""What a direct load decides from the target it pinned before its first write and read again after its
last (``adapters/clickhouse/target_pin``): the decision alone, without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.clickhouse.quoting import TableName
from airflow_provider_dpone.adapters.clickhouse.table_schema import TargetColumn
from airflow_provider_dpone.adapters.clickhouse.target_pin import (
    ChangedColumn,
    LoadScope,
    TablePin,
    changed_columns,
    table_changed_error,
    types_changed_error,
    what_changed,
)
from airflow_provider_dpone.contracts.errors import BLOCKING_CODES, ErrorCode

NAME = TableName("analytics", "orders")
LOAD = LoadScope("dbo.orders -> analytics.orders (incremental_append)", "sha256:" + "ab" * 32, 3)
ROOT = Path(__file__).resolve().parents[2]


def pin(
    within: int | None,
    total: int | None = None,
    identity: str | None = "uuid:1",
    mutations: frozenset[str] = frozenset(),
    *,
    deleting_ttl: bool = False,
) -> TablePin:
    return TablePin(
        identity=identity,
        engine="MergeTree",
        rows_within=within,
        rows_total=total,
        mutations=mutations,
        deleting_ttl=deleting_ttl,
    )


def test_an_append_that_leaves_what_it_found_and_inserted_changed_nothing() -> None:
    assert what_changed(pin(10, 100), pin(15, 105), inserted=5, keeps_rows=True) is None


def test_rows_other_writers_added_meanwhile_are_no_change() -> None:
    # a fan-in route appends into the same days: only ever more rows
    assert what_changed(pin(10, 100), pin(40, 130), inserted=5, keeps_rows=True) is None


def test_fewer_rows_in_the_armed_partitions_than_an_append_leaves_is_rows_missing() -> None:
    # truncated after some inserts: what was there and part of the run's rows are gone
    assert what_changed(pin(10, 100), pin(14, 104), inserted=5, keeps_rows=True) == "rows_missing"


def test_a_replacing_load_needs_only_its_own_rows_in_its_scope() -> None:
    assert what_changed(pin(10, 100), pin(5, 95), inserted=5, keeps_rows=False) is None
    assert what_changed(pin(10, 100), pin(4, 94), inserted=5, keeps_rows=False) == "rows_missing"


def test_rows_outside_the_armed_partitions_all_gone_is_the_table_emptied() -> None:
    # truncated before the first insert: the armed days' count is whole, the history is not
    assert what_changed(pin(0, 90), pin(5, 5), inserted=5, keeps_rows=True) == "rows_outside_emptied"


def test_a_table_that_held_nothing_outside_the_armed_partitions_cannot_be_found_emptied() -> None:
    assert what_changed(pin(0, 0), pin(5, 5), inserted=5, keeps_rows=True) is None


def test_fewer_rows_outside_but_some_left_is_no_change() -> None:
    # a retention job, another route replacing its own days: rows outside the scope may leave
    assert what_changed(pin(0, 90), pin(5, 30), inserted=5, keeps_rows=True) is None


def test_another_identity_is_a_replaced_table_whatever_its_counts() -> None:
    assert what_changed(pin(0, 90), pin(5, 95, identity="uuid:2"), inserted=5, keeps_rows=True) == (
        "table_replaced"
    )


def test_a_table_gone_is_dropped() -> None:
    assert what_changed(pin(0, 90), TablePin(identity=None), inserted=5, keeps_rows=True) == "table_dropped"


def test_a_table_not_counted_is_judged_by_its_identity_alone() -> None:
    # replicated engines: rows may lag on the replica that answers
    assert what_changed(pin(None), pin(None), inserted=5, keeps_rows=True) is None
    assert what_changed(pin(None), pin(None, identity="uuid:2"), inserted=5, keeps_rows=True) == (
        "table_replaced"
    )


def test_a_mutation_begun_during_the_load_is_a_change_whatever_the_counts() -> None:
    # an UPDATE of the rows it inserted, or a DELETE of the armed day and the same count inserted again
    before = pin(10, 100, mutations=frozenset({"mutation_3.txt"}))
    after = pin(15, 105, mutations=frozenset({"mutation_3.txt", "mutation_9.txt"}))
    assert what_changed(before, after, inserted=5, keeps_rows=True) == "mutated"
    # on a replicated engine, not counted, too
    assert (
        what_changed(pin(None), pin(None, mutations=frozenset({"0000000001"})), inserted=5, keeps_rows=True)
        == "mutated"
    )


def test_the_loads_own_delete_is_no_mutation_of_anyone_else() -> None:
    own = frozenset({"mutation_9.txt"})
    after = pin(5, 95, mutations=frozenset({"mutation_3.txt", "mutation_9.txt"}))
    before = pin(10, 100, mutations=frozenset({"mutation_3.txt"}))
    assert what_changed(before, after, inserted=5, keeps_rows=False, own=own) is None
    foreign = pin(5, 95, mutations=frozenset({"mutation_3.txt", "mutation_9.txt", "mutation_10.txt"}))
    assert what_changed(before, foreign, inserted=5, keeps_rows=False, own=own) == "mutated"


def test_a_done_mutation_the_server_cleaned_up_is_no_change() -> None:
    # the server keeps the last hundred done mutations: an id gone is not one begun
    before = pin(10, 100, mutations=frozenset({"mutation_1.txt", "mutation_3.txt"}))
    after = pin(15, 105, mutations=frozenset({"mutation_3.txt"}))
    assert what_changed(before, after, inserted=5, keeps_rows=True) is None


def test_a_table_whose_ttl_deletes_rows_still_keeps_what_the_load_leaves_in_its_partitions() -> None:
    # allow_target_ttl: the armed partitions are younger than the TTL, so a shortfall there is a change
    before, after = pin(10, 100, deleting_ttl=True), pin(14, 104, deleting_ttl=True)
    assert what_changed(before, after, inserted=5, keeps_rows=True) == "rows_missing"


def test_a_table_whose_ttl_deletes_rows_may_lose_every_row_outside_the_armed_partitions() -> None:
    # its history may all expire during the load; without such a TTL the same counts are the table emptied
    assert what_changed(pin(0, 90, deleting_ttl=True), pin(5, 5), inserted=5, keeps_rows=True) is None
    assert what_changed(pin(0, 90), pin(5, 5), inserted=5, keeps_rows=True) == "rows_outside_emptied"


def test_a_type_spelled_otherwise_is_the_same_type() -> None:
    found = {"amount": TargetColumn("amount", "Decimal(12,2)", ""), "id": TargetColumn("id", "Int64", "")}
    assert changed_columns({"amount": "Decimal(12, 2)", "id": "Int64"}, found) == []


def test_a_widened_or_missing_written_column_is_changed() -> None:
    found = {
        "amount": TargetColumn("amount", "Decimal(18, 4)", ""),
        "note": TargetColumn("note", "String", ""),
    }
    assert changed_columns({"amount": "Decimal(12, 2)", "customer": "String"}, found) == [
        ChangedColumn("amount", "Decimal(12, 2)", "Decimal(18, 4)"),
        ChangedColumn("customer", "String", None),
    ]


def test_the_code_blocks_the_route_and_names_its_runbook_section_in_both_copies() -> None:
    assert ErrorCode.TARGET_CHANGED_DURING_LOAD in BLOCKING_CODES  # exit 3: on-call must act
    error = types_changed_error(
        NAME,
        LOAD,
        [ChangedColumn("amount", "Decimal(12, 2)", "Decimal(18, 4)")],
        inserted=300,
        before_insert=True,
    )
    assert error.details["problem"] == "column_types_changed"
    assert any("'The target changed during a load'" in line for line in error.hint_lines)
    for runbook in (ROOT / "docs/runbook", ROOT / "airflow_provider_dpone/runbooks"):
        text = (runbook / "manual-reconciliation.md").read_text(encoding="utf-8")
        assert "## The target changed during a load" in text
        assert ErrorCode.TARGET_CHANGED_DURING_LOAD.value in text
        for problem in ("column_types_changed", "mutated", "rows_missing", "rows_outside_emptied"):
            assert f"`problem: {problem}`" in text


@pytest.mark.parametrize(
    "problem", ["table_dropped", "table_replaced", "mutated", "rows_missing", "rows_outside_emptied"]
)
def test_each_table_change_is_said_with_counts_only(problem: str) -> None:
    error = table_changed_error(NAME, LOAD, problem, pin(7, 90), pin(3, 3), inserted=5, keeps_rows=True)
    assert error.code is ErrorCode.TARGET_CHANGED_DURING_LOAD
    assert error.details["problem"] == problem
    assert str(NAME) in error.safe_message and LOAD.route in error.safe_message
    if problem == "rows_missing":
        assert (
            "holds 3 row(s) within the armed partitions where the run leaves at least 12"
            in error.safe_message
        )
    for line in (error.safe_message, *error.hint_lines):
        assert "SELECT" not in line and "ALTER" not in line  # no SQL to on-call


def test_a_mutation_is_named_by_its_ids_and_the_loads_own_is_not() -> None:
    before = pin(7, 90, mutations=frozenset({"mutation_2.txt"}))
    after = pin(12, 95, mutations=frozenset({"mutation_2.txt", "mutation_5.txt", "mutation_6.txt"}))
    own = frozenset({"mutation_5.txt"})
    error = table_changed_error(NAME, LOAD, "mutated", before, after, inserted=5, keeps_rows=False, own=own)
    assert error.details["mutation_ids"] == ["mutation_6.txt"]
    assert error.details["mutations"] == 1
    assert "1 mutation(s) (an update or a delete of its rows) began on it" in error.safe_message
    assert any("system.mutations" in line and "mutation_ids" in line for line in error.hint_lines)


def test_rows_missing_from_a_table_whose_ttl_deletes_rows_names_the_ttl() -> None:
    before, after = pin(0, 90, deleting_ttl=True), pin(3, 93, deleting_ttl=True)
    error = table_changed_error(NAME, LOAD, "rows_missing", before, after, inserted=5, keeps_rows=True)
    assert error.details["table_ttl_deletes_rows"] is True
    assert "or its TTL deleted them (a partition older than the TTL when it arrived)" in error.safe_message


def test_a_whole_table_append_under_a_deleting_ttl_requires_only_its_own_rows() -> None:
    # a permit without bounds counts the whole table: its older rows may expire in the merges the load's own
    # inserts set off (allow_target_ttl), which is no sign of a table emptied under the load
    expired = what_changed(
        pin(100, 100, deleting_ttl=True), pin(60, 60), inserted=5, keeps_rows=True, whole_table=True
    )
    assert expired is None
    short = what_changed(
        pin(100, 100, deleting_ttl=True), pin(4, 4), inserted=5, keeps_rows=True, whole_table=True
    )
    assert short == "rows_missing"
    # without a deleting TTL, or within armed partitions, the rows held before still count
    assert what_changed(pin(100, 100), pin(60, 60), inserted=5, keeps_rows=True, whole_table=True) == (
        "rows_missing"
    )
    assert what_changed(pin(100, 100, deleting_ttl=True), pin(60, 60), inserted=5, keeps_rows=True) == (
        "rows_missing"
    )
