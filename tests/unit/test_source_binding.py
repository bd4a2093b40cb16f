"""Which source connection a route's commits came from, and when another one is stopped.

The newest COMMITTED checkpoint that records a connection decides; checkpoints of older releases record
none. The black-box proof (two SQLite files, a moved file, an upgrade) is
``tests/integration/test_source_connection.py``; the Airflow one maps a task over source connections.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources.partition_planning import day_partitions
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.connection_binding import ConnectionBinding, require_bound_connections
from airflow_provider_dpone.runtime.replay.ref import CAPSULE_REF_KEY, capsule_ref, read_ref
from airflow_provider_dpone.runtime.route_family import RouteFamily
from airflow_provider_dpone.runtime.route_identity import RebaselineRequest
from airflow_provider_dpone.runtime.source_binding import (
    SOURCE_KEY,
    names_its_file,
    record_source_move,
    recorded_source,
    refuse_other_count,
    refuse_unproven_file,
    require_same_source,
    source_reference,
)
from tests.builders import stored_checkpoint

AT = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
)
DAYS = day_partitions("order_date", [dt.date(2026, 11, day) for day in range(1, 29)])
SHARD_A, SHARD_B = source_reference("shard_a"), source_reference("shard_b")


class FixedClock:
    def now(self) -> dt.datetime:
        return AT + dt.timedelta(days=1)

    def monotonic(self) -> float:
        return 0.0


def checkpoint(
    day: int, source: str | None, status: CheckpointStatus = CheckpointStatus.COMMITTED
) -> PartitionCheckpoint:
    stored = stored_checkpoint(ROUTE, DAYS[day], AT + dt.timedelta(minutes=day), status=status)
    if source is None:
        return stored  # written by a release before the source was recorded
    return stored.model_copy(update={"diagnostics": {SOURCE_KEY: source}})


def test_a_connection_is_recorded_by_its_name_and_an_inline_uri_by_a_digest() -> None:
    reference = source_reference("sqlite:///secret/place/source.sqlite")
    assert reference.startswith("sha256:") and "secret" not in reference
    assert reference != source_reference("sqlite:///secret/place/other.sqlite")
    assert source_reference(" shard_a ") == SHARD_A == "shard_a"  # edge whitespace is no other connection


def test_a_run_from_another_connection_stops_naming_the_source_change_and_the_move_command() -> None:
    history = [checkpoint(0, SHARD_A), checkpoint(1, SHARD_A)]

    with pytest.raises(DponeError) as raised:
        require_same_source(ROUTE, history, SHARD_B, "b.yaml")

    error = raised.value
    assert error.code is ErrorCode.ROUTE_IDENTITY_CHANGED
    assert error.details["changed"] == ["source"]
    assert error.details["recorded_source"] == SHARD_A and error.details["this_source"] == SHARD_B
    assert "reads source connection 'shard_b'" in str(error)
    assert "last committed through source connection 'shard_a'" in str(error)
    assert any("--source-moved" in line for line in error.hint_lines)


def test_an_inline_uri_is_not_printed() -> None:
    inline = "sqlite:///data/private/source_b.sqlite"
    with pytest.raises(DponeError) as raised:
        require_same_source(ROUTE, [checkpoint(0, SHARD_A)], source_reference(inline), "b.yaml")
    assert "private" not in str(raised.value) and "reads a source file" in str(raised.value)


@pytest.mark.parametrize(
    ("written", "names_one_file"),
    [
        ("sqlite:////srv/orders.sqlite", True),
        ("chdb:////srv/chdb", True),
        ("sqlite:///orders.sqlite", False),  # one file per manifest folder
        ("sqlite:///~/orders.sqlite", False),  # one file per user
        ("shard_src", False),  # a connection's bare name
    ],
)
def test_only_an_absolute_path_as_written_names_one_file(written: str, names_one_file: bool) -> None:
    assert names_its_file(written) is names_one_file


def test_a_history_recorded_in_a_form_naming_no_file_stops_saying_so_and_how_to_record_the_file() -> None:
    """Red before: the bare name (or a relative URI's text) was taken for whatever file the path resolves
    to now, so a new folder's run skipped every committed day, exit 0."""
    this = source_reference("sqlite:///dags/us/private/orders.sqlite")
    for recorded, history in (
        ("shard_src", "source connection 'shard_src', and only its name was recorded"),
        (source_reference("sqlite:///orders.sqlite"), "an inline source URI, and only its text was recorded"),
    ):
        with pytest.raises(DponeError) as raised:
            require_same_source(
                ROUTE, [checkpoint(0, recorded)], this, "us.yaml", earlier_forms_without_file=(recorded,)
            )

        error = raised.value
        assert error.code is ErrorCode.ROUTE_IDENTITY_CHANGED and error.details["changed"] == ["source"]
        assert error.details["reason"] == "history_names_no_file"
        assert history in str(error) and "not the file its path names" in str(error)
        assert "private" not in str(error) and "orders.sqlite" not in str(error)
        assert "  dpone guard rebaseline us.yaml --source-moved --reason '<the file" in error.hint_lines[3]
        assert any("do not rebaseline" in line for line in error.hint_lines)


@pytest.mark.parametrize(
    "written", ["shard_src", "sqlite:///orders.sqlite", "sqlite:///~/orders.sqlite"], ids=str
)
def test_a_move_over_a_history_naming_no_file_is_refused_where_no_key_can_prove_the_file(
    written: str,
) -> None:
    """Red before: on a route without an integer key, ``--source-moved`` over a bare-name history only
    warned (counts), recorded another folder's file, and its every day was then skipped, exit 0."""
    history = [checkpoint(0, source_reference(written))]
    with pytest.raises(DponeError) as raised:
        refuse_unproven_file(ROUTE, history, [], written, "no integer key column", "us.yaml")

    error = raised.value
    assert (
        error.code is ErrorCode.ROUTE_IDENTITY_CHANGED and error.details["reason"] == "history_names_no_file"
    )
    assert "cannot be proven by its keys" in str(error) and "orders.sqlite" not in str(error)
    assert any("--source-moved --force" in line for line in error.hint_lines)


def test_a_move_the_keys_need_not_prove_is_left_to_the_other_checks() -> None:
    absolute = "sqlite:////srv/eu/orders.sqlite"  # names its file: the history tells it
    refuse_unproven_file(ROUTE, [checkpoint(0, source_reference(absolute))], [], absolute, "none", "m.yaml")
    moved = [checkpoint(0, SHARD_A)]  # a history of another connection: an ordinary move
    refuse_unproven_file(ROUTE, moved, [], "shard_src", "none", "m.yaml")
    refuse_unproven_file(ROUTE, moved, [], None, "none", "m.yaml")  # nothing recorded of an earlier form


def test_a_keyless_move_whose_newest_partition_holds_another_count_is_refused_unless_forced() -> None:
    """Red before: counts were the only evidence on a route without an integer key, and another count only
    warned: a bare-name history respelled as an inline URI recorded another folder's file, exit 0."""
    copied = checkpoint(3, SHARD_B)
    other = copied.model_copy(update={"rows": 100, "diagnostics": {"rebaseline": {"source_rows_now": 140}}})
    with pytest.raises(DponeError) as raised:
        refuse_other_count(ROUTE, other, "no integer key column", "us.yaml")
    assert raised.value.details["keys_compared"] is False and raised.value.details["source_rows_now"] == 140
    assert any("--source-moved --force" in line for line in raised.value.hint_lines)

    same = other.model_copy(update={"diagnostics": {"rebaseline": {"source_rows_now": 100}}})
    refuse_other_count(ROUTE, same, "no integer key column", "us.yaml")  # the same count: the warning's case


def _bound(history: list[PartitionCheckpoint], binding: ConnectionBinding) -> None:
    family = RouteFamily(route=ROUTE, own=tuple(history), target_wide=tuple(history))
    require_bound_connections(family, binding, "m.yaml", naming=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "written", ["shard_src", "sqlite:///orders.sqlite", "sqlite:///~/orders.sqlite"], ids=str
)
def test_a_history_under_an_earlier_form_that_names_no_file_is_not_taken_for_this_file(written: str) -> None:
    binding = ConnectionBinding(source="sqlite:///dags/us/orders.sqlite", source_as_written=written)

    with pytest.raises(DponeError) as raised:
        _bound([checkpoint(0, source_reference(written))], binding)

    assert raised.value.details["reason"] == "history_names_no_file"


def test_a_history_under_an_absolute_uri_as_written_is_still_taken_as_this_file() -> None:
    written = "sqlite:////srv/dags/eu/./orders.sqlite"
    binding = ConnectionBinding(source="sqlite:///srv/dags/eu/orders.sqlite", source_as_written=written)

    _bound([checkpoint(0, source_reference(written))], binding)
    with pytest.raises(DponeError) as raised:  # another file's record still stops, as another source
        _bound([checkpoint(0, source_reference("sqlite:////srv/dags/us/orders.sqlite"))], binding)
    assert "reason" not in raised.value.details


def test_the_same_connection_and_a_history_without_any_recorded_source_pass() -> None:
    require_same_source(ROUTE, [checkpoint(0, SHARD_A)], SHARD_A, "a.yaml")
    require_same_source(ROUTE, [checkpoint(0, None), checkpoint(1, None)], SHARD_B, "b.yaml")
    require_same_source(ROUTE, [], SHARD_B, "b.yaml")


@given(
    st.lists(
        st.tuples(
            st.sampled_from([SHARD_A, SHARD_B, None]),
            st.sampled_from([CheckpointStatus.COMMITTED, CheckpointStatus.FAILED, CheckpointStatus.EXPORTED]),
        ),
        max_size=12,
    ),
    st.sampled_from([SHARD_A, SHARD_B]),
)
def test_the_newest_commit_that_records_a_connection_decides(
    history: list[tuple[str | None, CheckpointStatus]], this: str
) -> None:
    stored = [checkpoint(i, source, status) for i, (source, status) in enumerate(history)]
    deciding = [s for s, status in history if s is not None and status is CheckpointStatus.COMMITTED]

    newest = recorded_source(stored)

    assert (newest.diagnostics[SOURCE_KEY] if newest else None) == (deciding[-1] if deciding else None)
    if deciding and deciding[-1] != this:
        with pytest.raises(DponeError):
            require_same_source(ROUTE, stored, this, "m.yaml")
    else:
        require_same_source(ROUTE, stored, this, "m.yaml")


def test_a_recorded_move_is_an_audited_copy_of_the_newest_commit_naming_this_connection() -> None:
    history = [checkpoint(0, SHARD_A), checkpoint(1, SHARD_A), checkpoint(2, None)]
    request = RebaselineRequest(reason="the file moved to /data/new", actor="oncall")

    record = record_source_move(ROUTE, history, SHARD_B, "rebaseline__x", FixedClock(), request)

    newest = history[1]
    assert (record.partition_id, record.bounds, record.rows) == (
        newest.partition_id,
        newest.bounds,
        newest.rows,
    )
    assert (record.query_hash, record.schema_hash) == (newest.query_hash, newest.schema_hash)
    assert record.status is CheckpointStatus.COMMITTED and record.run_id == "rebaseline__x"
    assert record.diagnostics[SOURCE_KEY] == SHARD_B
    audit = record.diagnostics["rebaseline"]
    assert isinstance(audit, dict) and audit["source_moved_from"] == SHARD_A and audit["actor"] == "oncall"
    require_same_source(ROUTE, [*history, record], SHARD_B, "b.yaml")  # the next run goes on
    with pytest.raises(DponeError):
        require_same_source(ROUTE, [*history, record], SHARD_A, "a.yaml")  # the old one stops


def test_a_recorded_move_keeps_the_capsule_reference_of_the_commit_it_copies() -> None:
    """The copy becomes its partition's latest checkpoint, where the capsule scan looks: without the
    reference, an operation whose quality verdict failed (or is still owed) no longer blocked the route."""
    ref = capsule_ref("sha256:" + "a" * 64)
    newest = checkpoint(1, SHARD_A)
    newest = newest.model_copy(update={"diagnostics": {**newest.diagnostics, CAPSULE_REF_KEY: ref}})
    request = RebaselineRequest(reason="the file moved to /data/new", actor="oncall")

    record = record_source_move(
        ROUTE, [checkpoint(0, SHARD_A), newest], SHARD_B, "rebaseline__x", FixedClock(), request
    )

    kept = read_ref(record)
    assert kept is not None and kept.operation_id == "sha256:" + "a" * 64
    assert record.diagnostics[SOURCE_KEY] == SHARD_B


@pytest.mark.parametrize(
    "history",
    [[checkpoint(0, SHARD_B)], [checkpoint(0, None)], []],
    ids=["already-this-connection", "nothing-recorded", "no-checkpoint"],
)
def test_a_move_with_nothing_to_record_is_refused(history: list[PartitionCheckpoint]) -> None:
    request = RebaselineRequest(reason="moved", actor="oncall")
    with pytest.raises(DponeError) as raised:
        record_source_move(ROUTE, history, SHARD_B, "rebaseline__x", FixedClock(), request)
    assert raised.value.code is ErrorCode.USAGE


def test_a_move_needs_a_reason() -> None:
    with pytest.raises(DponeError) as raised:
        record_source_move(
            ROUTE,
            [checkpoint(0, SHARD_A)],
            SHARD_B,
            "r",
            FixedClock(),
            RebaselineRequest(reason=" ", actor="x"),
        )
    assert raised.value.code is ErrorCode.USAGE


SIBLING = ROUTE.model_copy(update={"strategy": Strategy.REPLACE_PARTITION})


def sibling_commit(day: int, source: str) -> PartitionCheckpoint:
    stored = stored_checkpoint(SIBLING, DAYS[day], AT + dt.timedelta(minutes=day))
    return stored.model_copy(update={"diagnostics": {SOURCE_KEY: source}})


def test_a_sibling_routes_newer_commit_decides_and_an_older_one_does_not() -> None:
    own = [checkpoint(0, SHARD_A), checkpoint(5, SHARD_A)]

    with pytest.raises(DponeError) as raised:
        require_same_source(ROUTE, [], SHARD_B, "b.yaml", siblings=own)  # B under another strategy
    assert raised.value.details["newest_commit"]["route"] == ROUTE.describe()
    assert recorded_source(own, [sibling_commit(9, SHARD_B)]) == sibling_commit(9, SHARD_B)
    assert recorded_source(own, [sibling_commit(2, SHARD_B)]) == own[1]


def test_a_move_recorded_over_a_siblings_commit_stays_that_routes_record() -> None:
    request = RebaselineRequest(reason="moved", actor="oncall")

    record = record_source_move(
        ROUTE, [], SHARD_B, "rebaseline__x", FixedClock(), request, siblings=[sibling_commit(3, SHARD_A)]
    )

    assert record.route == SIBLING and record.diagnostics[SOURCE_KEY] == SHARD_B
    require_same_source(ROUTE, [], SHARD_B, "b.yaml", siblings=[sibling_commit(3, SHARD_A), record])
