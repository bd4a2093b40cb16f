"""The cursor's high-water mark orders every value a cursor column can hold and never goes back."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.runtime import cursor_mark
from airflow_provider_dpone.runtime.chunk_stream import StreamTally
from airflow_provider_dpone.runtime.progress import SilentProgress

_cursor_values = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.decimals(allow_nan=False, allow_infinity=False, places=2),
    st.text(max_size=6),
    st.binary(max_size=9),
    st.dates(),
    st.datetimes(),
    st.datetimes(timezones=st.just(timezone.utc)),
)


@given(st.lists(_cursor_values, max_size=12))
def test_the_highest_of_any_mix_of_cursor_values_is_one_no_other_value_orders_above(
    values: list[object],
) -> None:
    """Red before: ``max`` over a column holding text and bytes (a SQLite ``TEXT`` column with a blob) raised
    ``TypeError`` inside the target call and left the batch's outcome unknown."""
    top = cursor_mark.highest(values)
    present = [v for v in values if v is not None]
    if not present:
        assert top is None
        return
    assert top in present
    assert all(cursor_mark.order_key(v) <= cursor_mark.order_key(top) for v in present)


def test_text_orders_below_bytes_as_sqlite_orders_a_column_that_holds_both() -> None:
    assert cursor_mark.highest(["zzz", b"a", None, "c"]) == b"a"
    assert cursor_mark.highest([3, "1", 2.5]) == "1"


@given(_cursor_values.filter(lambda v: v is not None), _cursor_values.filter(lambda v: v is not None))
def test_a_stored_mark_read_back_never_goes_back_below_a_lower_moved_value(
    recorded: object, moved: object
) -> None:
    state = json.loads(json.dumps(cursor_mark.stored(recorded)))  # through the store's JSON
    kept = cursor_mark.later(moved, state["high_water"], state.get(cursor_mark.KIND_KEY))
    assert kept is not None
    if type(recorded) is type(moved) and cursor_mark.order_key(recorded) > cursor_mark.order_key(moved):
        assert cursor_mark.order_key(kept) == cursor_mark.order_key(recorded)


def test_a_binary_mark_is_stored_as_hex_and_read_back_as_bytes() -> None:
    """Red before: bytes were stored as Python's text for them (``"b'\\x00...\\t'"``) and a later run's lower
    counter replaced the mark."""
    nine, seven = (9).to_bytes(8, "big"), (7).to_bytes(8, "big")
    state = cursor_mark.stored(nine)
    assert state == {"high_water": "0x0000000000000009", "high_water_kind": "bytes"}
    assert cursor_mark.later(seven, state["high_water"], state["high_water_kind"]) == nine
    assert cursor_mark.later(b"\x00" * 7 + b"\x0a", state["high_water"], "bytes") == b"\x00" * 7 + b"\x0a"


def test_a_binary_mark_an_earlier_release_stored_as_python_text_is_read_back_as_bytes() -> None:
    nine = (9).to_bytes(8, "big")
    assert cursor_mark.later((7).to_bytes(8, "big"), str(nine), None) == nine


def test_a_text_mark_of_a_text_and_bytes_column_gives_way_to_bytes_and_bytes_to_no_text() -> None:
    assert cursor_mark.later(b"a", "zzz", None) == b"a"
    assert cursor_mark.later("zzz", "0x61", "bytes") == b"a"


def test_dates_and_times_naive_or_aware_compare_without_raising() -> None:
    aware = datetime(2026, 1, 2, 10, tzinfo=timezone(timedelta(hours=2)))
    assert cursor_mark.highest([datetime(2026, 1, 2, 9), aware]) == datetime(2026, 1, 2, 9)
    assert cursor_mark.highest([date(2026, 1, 3), datetime(2026, 1, 2, 23)]) == date(2026, 1, 3)
    assert cursor_mark.later(Decimal("10.00"), "900.00") == Decimal("900.00")


def test_the_stream_tally_keeps_the_highest_cursor_value_across_chunks_of_mixed_types() -> None:
    tally = StreamTally(cursor="c")

    def chunk(pid: str, ids: tuple[int, ...], values: tuple[object, ...]) -> ColumnChunk:
        return ColumnChunk(partition_id=pid, names=("id", "c"), columns=(ids, values), row_count=len(ids))

    first = [chunk("p1", (1, 2), ("a", None)), chunk("p1", (3,), (b"b",)), chunk("p1", (4,), ("zz",))]
    assert len(list(tally.counted("p1", "d=1", first, SilentProgress()))) == 3
    assert len(list(tally.counted("p2", "d=2", [chunk("p2", (5,), ("y",))], SilentProgress()))) == 1
    assert tally.cursor_high_water() == b"b"
