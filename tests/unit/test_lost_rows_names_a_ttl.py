"""The lost-rows stop names a TTL that deletes rows, read through the sink, and a failed read masks nothing.

A TTL added to the target after rows were committed expires them; the stop used to send on-call to restore
the table or reload it, which the TTL expires again. In-memory port doubles; the same on chDB, black-box, is
``tests/integration/test_target_checked_when_all_skipped.py``.
"""

from __future__ import annotations

import pytest

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from tests.doubles import InMemoryCheckpointStore, MemorySource, RecordingSink, orders_rows, transfer_engine


class _TtlSink(RecordingSink):
    """A target whose table has a TTL that deletes rows (``TtlReportingSink``), or whose read of it fails."""

    def __init__(self, *, fails: bool = False) -> None:
        super().__init__()
        self.fails = fails
        self.asked: list[str] = []

    def deleting_ttl(self, table: str) -> bool:
        self.asked.append(table)
        if self.fails:
            raise DponeError(ErrorCode.TARGET_UNREACHABLE, "could not read the target table")
        return True


def _stop(sink: RecordingSink) -> DponeError:
    """One run commits two days, the target then loses every row, and the next run must stop."""
    store = InMemoryCheckpointStore()
    transfer_engine(store=store, source=MemorySource(orders_rows(days=2)), sink=sink).run("run-1")
    assert sorted(sink.tables["analytics.orders"]) == sorted(orders_rows(days=2))
    sink.tables["analytics.orders"].clear()  # the TTL expired them
    with pytest.raises(DponeError) as raised:
        transfer_engine(store=store, source=MemorySource(orders_rows(days=2)), sink=sink).run("run-2")
    assert raised.value.code is ErrorCode.TARGET_LOST_COMMITTED_ROWS
    assert sink.tables["analytics.orders"] == []  # nothing written
    return raised.value


def test_the_lost_rows_stop_names_a_ttl_that_deletes_rows_and_its_runbook_section() -> None:
    sink = _TtlSink()

    error = _stop(sink)

    assert sink.asked == ["analytics.orders"]
    assert "TTL that deletes rows" in error.safe_message
    assert error.details["deleting_ttl"] is True
    hints = "\n".join(error.hint_lines)
    assert "has a TTL that deletes rows once they expire" in hints
    assert "runbook:  dpone runbook guard (section 'A TTL on the target')" in hints
    # the TTL comes before the remedies it would undo
    assert hints.index("REMOVE TTL") < hints.index("restore the target table, or reload deliberately")


def test_a_failed_read_of_the_ttl_leaves_the_stop_as_it_was() -> None:
    error = _stop(_TtlSink(fails=True))

    assert "TTL" not in error.safe_message and "deleting_ttl" not in error.details
    assert not any("TTL" in line for line in error.hint_lines)


def test_a_target_that_cannot_tell_its_ttl_stops_without_naming_one() -> None:
    error = _stop(RecordingSink())

    assert "deleting_ttl" not in error.details
    assert error.hint_lines[-1].startswith("restore the target table, or reload deliberately")
