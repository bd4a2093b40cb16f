"""ArrowIpcArtifactStore on the real file system with real pyarrow: round trip, digests, tamper
detection before any row is handed over, streaming writes, type mapping."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_provider_dpone.adapters.artifacts.arrow_ipc import ArrowIpcArtifactStore
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

PARTITION = "sha256:" + "5e" * 32
SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="order_date", clickhouse_type="Date"),
        ColumnSpec(name="customer", clickhouse_type="String"),
        ColumnSpec(name="amount", clickhouse_type="Decimal(12,2)"),
        ColumnSpec(name="updated_at", clickhouse_type="DateTime"),
    )
)


def demo_chunk(start: int, n: int) -> ColumnChunk:
    ids = list(range(start, start + n))
    return ColumnChunk(
        partition_id=PARTITION,
        names=SCHEMA.names,
        columns=(
            ids,
            [None if i % 7 == 0 else date(2026, 12, 1 + i % 28) for i in ids],
            [None if i % 5 == 0 else f"customer {i} ü'\\" for i in ids],
            [None if i % 11 == 0 else Decimal(i) / 100 - Decimal("50.00") for i in ids],
            [None if i % 13 == 0 else datetime(2026, 12, 1, i % 24, i % 60, 59 - i % 60) for i in ids],
        ),
        row_count=n,
    )


def rows_of(chunks: list[ColumnChunk]) -> list[tuple[object, ...]]:
    return [row for chunk in chunks for row in zip(*chunk.columns, strict=True)]


@pytest.fixture
def store(tmp_path: Path) -> ArrowIpcArtifactStore:
    return ArrowIpcArtifactStore(tmp_path / "artifacts")


def test_round_trip_returns_every_value_in_bounded_chunks(store: ArrowIpcArtifactStore) -> None:
    written = [demo_chunk(0, 2500), demo_chunk(2500, 2500), demo_chunk(5000, 10)]

    ref = store.write(PARTITION, SCHEMA, iter(written))
    read = list(store.read(ref, 1000))

    assert ref.rows == 5010
    assert ref.partition_id == PARTITION
    assert max(c.row_count for c in read) == 1000
    assert all(c.names == SCHEMA.names and c.partition_id == PARTITION for c in read)
    assert rows_of(read) == rows_of(written)  # None, Decimal, date and naive datetime survive exactly


def test_chunks_read_back_carry_the_files_arrow_arrays_and_build_python_values_only_when_iterated(
    store: ArrowIpcArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sink inserts the arrays as they are (chDB) or reads dates and times from them as integers
    (Native): no Python value per cell unless a consumer iterates the column, and then exactly the
    written values, of the same types."""
    from airflow_provider_dpone.adapters.artifacts import arrow_ipc, arrow_types
    from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn

    written = [demo_chunk(0, 700)]
    ref = store.write(PARTITION, SCHEMA, iter(written))
    built: list[str] = []

    def counted(array: pa.Array) -> list[object]:
        built.append(str(array.type))
        return arrow_types.from_arrow(array)

    monkeypatch.setattr(arrow_ipc, "from_arrow", counted)
    read = list(store.read(ref, 300))

    assert [c.row_count for c in read] == [300, 300, 100]
    schema = arrow_types.arrow_schema(SCHEMA)
    for chunk in read:
        assert all(isinstance(column, ArrowColumn) for column in chunk.columns)
        assert [column.array.type for column in chunk.columns] == schema.types  # type: ignore[attr-defined]
    assert built == []  # nothing iterated yet
    rows = rows_of(read)
    assert len(built) == 3 * len(SCHEMA.columns)
    assert rows == rows_of(written)
    assert [tuple(type(v) for v in row) for row in rows] == [
        tuple(type(v) for v in row) for row in rows_of(written)
    ]


def test_digest_is_the_sha256_of_the_file_bytes_and_stable_across_writes(
    store: ArrowIpcArtifactStore, tmp_path: Path
) -> None:
    first = store.write(PARTITION, SCHEMA, [demo_chunk(0, 300), demo_chunk(300, 300)])
    data = Path(first.path).read_bytes()
    assert first.artifact_sha256 == "sha256:" + hashlib.sha256(data).hexdigest()
    assert first.bytes == len(data)

    again = ArrowIpcArtifactStore(tmp_path / "elsewhere").write(
        PARTITION, SCHEMA, [demo_chunk(0, 300), demo_chunk(300, 300)]
    )
    assert again.artifact_sha256 == first.artifact_sha256


@pytest.mark.parametrize("damage", ["flip_a_byte", "truncate", "append", "delete"])
def test_a_damaged_file_is_artifact_invalid_before_any_chunk_is_yielded(
    store: ArrowIpcArtifactStore, damage: str
) -> None:
    ref = store.write(PARTITION, SCHEMA, [demo_chunk(0, 500)])
    path = Path(ref.path)
    data = bytearray(path.read_bytes())
    if damage == "flip_a_byte":
        data[-200] ^= 0x01  # inside the last batch: an early-stopping reader would not notice
        path.write_bytes(bytes(data))
    elif damage == "truncate":
        path.write_bytes(bytes(data[:-8]))
    elif damage == "append":
        path.write_bytes(bytes(data) + b"\0")
    else:
        path.unlink()

    with pytest.raises(DponeError) as invalid:
        store.read(ref, 100)  # raised by the call itself, not by a later next()

    assert invalid.value.code is ErrorCode.ARTIFACT_INVALID
    assert invalid.value.details["partition_id"] == PARTITION
    assert str(path.parent) not in invalid.value.safe_message  # the directory is never printed


def test_a_file_changed_after_verification_fails_the_stream(store: ArrowIpcArtifactStore) -> None:
    ref = store.write(PARTITION, SCHEMA, [demo_chunk(0, 100), demo_chunk(100, 100)])
    stream = store.read(ref, 100)  # verified here
    path = Path(ref.path)
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x01
    path.write_bytes(bytes(data))

    with pytest.raises(DponeError) as invalid:
        list(stream)
    assert invalid.value.code is ErrorCode.ARTIFACT_INVALID


def test_a_file_damaged_after_verify_is_still_refused_by_read_before_any_chunk(
    store: ArrowIpcArtifactStore,
) -> None:
    # read() skips its own up-front hash only for a file verify() saw unchanged since; a later write moves
    # mtime/ctime (the pause steps past the file system's coarse timestamp clock, a few ms on Linux; a
    # change inside that window is caught by the streaming hash instead, still before the commit)
    ref = store.write(PARTITION, SCHEMA, [demo_chunk(0, 500)])
    store.verify(ref)
    time.sleep(0.05)
    path = Path(ref.path)
    data = bytearray(path.read_bytes())
    data[-200] ^= 0x01
    path.write_bytes(bytes(data))

    with pytest.raises(DponeError) as invalid:
        store.read(ref, 100)
    assert invalid.value.code is ErrorCode.ARTIFACT_INVALID


def test_a_verified_file_reads_back_every_row_and_can_be_read_again(store: ArrowIpcArtifactStore) -> None:
    written = [demo_chunk(0, 700)]
    ref = store.write(PARTITION, SCHEMA, written)
    store.verify(ref)

    assert rows_of(list(store.read(ref, 300))) == rows_of(written)
    assert rows_of(list(store.read(ref, 300))) == rows_of(written)  # re-verified: no stale trust


def test_chunks_are_written_as_they_arrive_not_held_for_the_whole_partition(
    store: ArrowIpcArtifactStore, tmp_path: Path
) -> None:
    sizes: list[int] = []

    def chunks() -> Iterator[ColumnChunk]:
        for index in range(4):
            if index:
                partial = next((tmp_path / "artifacts").glob("*.tmp"))
                sizes.append(partial.stat().st_size)
            yield demo_chunk(index * 1000, 1000)

    ref = store.write(PARTITION, SCHEMA, chunks())

    assert sizes == sorted(sizes) and len(set(sizes)) == 3  # the file grew with every chunk
    assert not list((tmp_path / "artifacts").glob("*.tmp"))
    assert ref.rows == 4000


def test_a_source_failing_mid_write_leaves_no_file_and_keeps_its_exception(
    store: ArrowIpcArtifactStore, tmp_path: Path
) -> None:
    boom = ConnectionError("source dropped")

    def chunks() -> Iterator[ColumnChunk]:
        yield demo_chunk(0, 10)
        raise boom

    with pytest.raises(ConnectionError) as raised:
        store.write(PARTITION, SCHEMA, chunks())

    assert raised.value is boom
    assert list((tmp_path / "artifacts").iterdir()) == []


def test_remove_deletes_the_file_and_is_idempotent(store: ArrowIpcArtifactStore) -> None:
    ref = store.write(PARTITION, SCHEMA, [demo_chunk(0, 10)])
    store.remove(ref)
    store.remove(ref)
    assert not Path(ref.path).exists()


def test_an_empty_partition_round_trips_as_zero_rows(store: ArrowIpcArtifactStore) -> None:
    ref = store.write(PARTITION, SCHEMA, [])
    assert ref.rows == 0
    assert list(store.read(ref, 10)) == []


def test_float_decimals_are_kept_only_when_exact_at_the_scale(store: ArrowIpcArtifactStore) -> None:
    # exact or stop: a float that is exact at the scale is stored as that decimal; a digit past the scale is
    # refused, never truncated (the sources already refuse it; the artifact is the last line)
    schema = TableSchema(columns=(ColumnSpec(name="amount", clickhouse_type="Decimal(12,2)"),))
    exact = ColumnChunk(PARTITION, ("amount",), ([12.5, 0.1, None, -1.05],), 4)

    ref = store.write(PARTITION, schema, [exact])

    assert rows_of(list(store.read(ref, 10))) == [
        (Decimal("12.50"),),
        (Decimal("0.10"),),
        (None,),
        (Decimal("-1.05"),),
    ]
    past_the_scale = ColumnChunk(PARTITION, ("amount",), ([7.999],), 1)
    with pytest.raises(DponeError) as refused:
        store.write(PARTITION, schema, [past_the_scale])
    assert refused.value.code is ErrorCode.ARTIFACT_INVALID and "'amount'" in str(refused.value)
    assert "7.99" not in str(refused.value)  # the column is named, never the value


def test_binary_string_values_round_trip_beside_text_in_one_column(store: ArrowIpcArtifactStore) -> None:
    # SQL Server varbinary / SQLite BLOB values arrive as bytes in a ClickHouse String column, even mixed
    # with text in one column. Text comes back as str and non-UTF-8 bytes as bytes; bytes that are valid
    # UTF-8 come back as that text, which ClickHouse stores as the very same bytes.
    schema = TableSchema(
        columns=(
            ColumnSpec(name="payload", clickhouse_type="String"),
            ColumnSpec(name="text", clickhouse_type="String", nullable=False),
            ColumnSpec(name="code", clickhouse_type="FixedString(2)"),
        )
    )
    first = ColumnChunk(
        PARTITION,
        schema.names,
        (
            [b"\xff\x00\xfe", "plain text \u00fc", None, b"utf-8 \xc3\xbc", b"\x80"],
            ["a", "Zo\u00eb \u00c5ngstr\u00f6m", "", "x\u0000y", "\u65e5\u672c"],
            [b"\xff\xff", None, b"\xc3\x28", b"ab", b"\x00\x01"],
        ),
        5,
    )
    second = ColumnChunk(PARTITION, schema.names, (["only text"], ["t"], [b"ok"]), 1)

    ref = store.write(PARTITION, schema, [first, second])
    read = list(store.read(ref, 3))

    assert rows_of(read) == [
        (b"\xff\x00\xfe", "a", b"\xff\xff"),
        ("plain text \u00fc", "Zo\u00eb \u00c5ngstr\u00f6m", None),
        (None, "", b"\xc3\x28"),
        ("utf-8 \u00fc", "x\u0000y", "ab"),
        (b"\x80", "\u65e5\u672c", "\x00\x01"),
        ("only text", "t", "ok"),
    ]
    assert all(type(v) is str for chunk in read for v in chunk.columns[1])  # an all-text column stays str


def test_type_mapping_covers_integers_floats_flags_and_datetime64(store: ArrowIpcArtifactStore) -> None:
    schema = TableSchema(
        columns=(
            ColumnSpec(name="u8", clickhouse_type="UInt8", nullable=False),
            ColumnSpec(name="i32", clickhouse_type="Int32"),
            ColumnSpec(name="f64", clickhouse_type="Float64"),
            ColumnSpec(name="flag", clickhouse_type="Bool"),
            ColumnSpec(name="code", clickhouse_type="LowCardinality(String)"),
            ColumnSpec(name="d32", clickhouse_type="Decimal32(3)"),
            ColumnSpec(name="at_ms", clickhouse_type="DateTime64(3)"),
            ColumnSpec(name="at_tz", clickhouse_type="DateTime('UTC')"),
        )
    )
    values = (
        [0, 255],
        [-(2**31), None],
        [1.5, None],
        [True, None],
        ["x", None],
        [Decimal("1.234"), None],
        [datetime(2026, 12, 1, 1, 2, 3, 456000), None],
        [datetime(2026, 12, 1, 1, 2, 3), None],
    )
    ref = store.write(PARTITION, schema, [ColumnChunk(PARTITION, schema.names, values, 2)])

    (chunk,) = list(store.read(ref, 10))

    assert chunk.columns == tuple(list(v) for v in values)


def test_an_unsupported_type_is_refused_by_column_before_a_file_exists(
    store: ArrowIpcArtifactStore, tmp_path: Path
) -> None:
    schema = TableSchema(columns=(ColumnSpec(name="tags", clickhouse_type="Array(String)"),))
    with pytest.raises(DponeError) as refused:
        store.write(PARTITION, schema, [])
    assert refused.value.code is ErrorCode.UNSUPPORTED_COLUMN_TYPE
    assert refused.value.details["column"] == "tags"
    assert list((tmp_path / "artifacts").iterdir()) == []


@pytest.mark.parametrize(
    ("values", "message_part"),
    [
        ((["seven"], [None], [None], [None], [None]), "'id' holds a value that does not fit Int64"),
        (([None], [None], [None], [None], [None]), "'id' is not nullable but holds NULL"),
    ],
)
def test_a_value_that_does_not_fit_its_column_is_refused_by_name_without_the_value(
    store: ArrowIpcArtifactStore, values: tuple[list[object], ...], message_part: str
) -> None:
    with pytest.raises(DponeError) as refused:
        store.write(PARTITION, SCHEMA, [ColumnChunk(PARTITION, SCHEMA.names, values, 1)])
    assert refused.value.code is ErrorCode.ARTIFACT_INVALID
    assert message_part in refused.value.safe_message
    assert "seven" not in refused.value.render()
