"""A partition's key fingerprint is the same number on every engine that holds the same rows.

``dpone checkpoints --verify`` and ``dpone guard rebaseline --source-moved`` compare the fingerprint a
source computes with the one the target computes (``contracts.key_fingerprint``): any difference between
engines would report drift that is not there, or refuse a real move. Rows are loaded for real (``dpone
run``), then both sides are asked, one partition at a time and in batches: SQLite into chDB and into the
ClickHouse 18.16 server, and SQL Server (the TDS emulator over pymssql) into both. Each fingerprint is also
compared with the one computed here in Python from the rows, so equal fingerprints are also right ones.
Values cover both ends of 64 bits, negatives (a remainder takes the dividend's sign on every engine; 18.16
took an ``Int32`` modulo a ``UInt32`` unsigned) and NULLs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.key_fingerprint import KEY_MODULUS, ColumnDigest, KeyFingerprint
from airflow_provider_dpone.contracts.manifest import SourceSpec, SourceType
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.manifests.loader import load_manifest
from airflow_provider_dpone.runtime.key_fingerprint import disjoint_batches
from tests.conftest import tds_emulator_data
from tests.integration.hand_made_target_rig import target_for

EDGE = 2**63
#: (id, day, ref, small): 64-bit ends, negatives, NULLs; three days and a fourth holding only NULL refs
ROWS: list[tuple[int, str, int | None, int]] = [
    (-EDGE, "2026-03-01", -7, -32768),
    (-5, "2026-03-01", None, -1),
    (3, "2026-03-01", EDGE - 1, 0),
    (EDGE - 1, "2026-03-02", -(2**31), 32767),
    (2**40 + 17, "2026-03-02", 2**31, 5),
    (-(2**33) - 1, "2026-03-03", 123456789012, 7),
    (42, "2026-03-04", None, 1),
]
COLUMNS = ["id", "ref", "small"]


def digest(values: Sequence[int | None]) -> ColumnDigest:
    present = [v for v in values if v is not None]
    if not present:
        return ColumnDigest(values=0)
    # SQL's remainder: the sign of the dividend (Python's % takes the divisor's)
    residues = [abs(v) % KEY_MODULUS * (1 if v >= 0 else -1) for v in present]
    return ColumnDigest(
        values=len(present), minimum=min(present), maximum=max(present), residue_sum=sum(residues)
    )


def expected(rows: Sequence[Sequence[Any]], columns: Sequence[int]) -> KeyFingerprint:
    return KeyFingerprint(rows=len(rows), columns=tuple(digest([r[i] for r in rows]) for i in columns))


def dpone(*args: str) -> None:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output


def committed_bounds(manifest: Path) -> list[PartitionBounds]:
    with open_runtime(load_manifest(str(manifest)), read_only=True) as runtime:
        return sorted({c.bounds for c in runtime.family().own}, key=lambda b: b.label)


def both_ways(
    source: Any, sink: ClickHouseSink, table: str, bounds: Sequence[PartitionBounds], columns: Sequence[str]
) -> tuple[dict[str, KeyFingerprint], dict[str, KeyFingerprint]]:
    """Every partition's fingerprint on each side, asked alone and in the batches ``--verify`` uses; the two
    ways agree on each side."""
    on_source: dict[str, KeyFingerprint] = {}
    on_target: dict[str, KeyFingerprint] = {}
    for batch in disjoint_batches(bounds):
        theirs = sink.key_fingerprints(table, batch, columns)
        assert theirs is not None
        on_target.update((b.label, f) for b, f in zip(batch, theirs, strict=True))
        on_source.update(
            (b.label, f) for b, f in zip(batch, source.key_fingerprints(batch, columns), strict=True)
        )
    for one in bounds:
        assert source.key_fingerprints([one], columns) == [on_source[one.label]]
        assert sink.key_fingerprints(table, [one], columns) == [on_target[one.label]]
    return on_source, on_target


@pytest.mark.parametrize("target", ["chdb", pytest.param("server", marks=pytest.mark.service)])
def test_sqlite_and_clickhouse_compute_the_same_fingerprint_of_the_same_rows(
    target: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    with sqlite3.connect(tmp_path / "keys.sqlite") as db:
        db.execute(
            "CREATE TABLE keys_t (id INTEGER PRIMARY KEY, day TEXT NOT NULL, ref INTEGER, small SMALLINT)"
        )
        db.executemany("INSERT INTO keys_t VALUES (?, ?, ?, ?)", ROWS)
    endpoint, connection, table = target_for(target, tmp_path, request, monkeypatch, "keys_t")
    manifest = tmp_path / "keys.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: keys
source: {{type: sqlite, connection: "sqlite:///keys.sqlite", table: keys_t,
          partitioning: {{kind: day, column: day}}}}
sink: {{type: clickhouse, connection: "{connection}", table: {table}, strategy: incremental_append,
        order_by: [day, id]}}
checkpoints: {{connection: "sqlite:///state.sqlite"}}
""",
        encoding="utf-8",
    )
    dpone("run", str(manifest))
    bounds = committed_bounds(manifest)
    assert len(bounds) == 4 and len(disjoint_batches(bounds)) == 1  # four days, one statement per side

    source = SqliteSource(tmp_path / "keys.sqlite", load_manifest(str(manifest)).manifest.source)
    sink = ClickHouseSink(endpoint)
    try:
        assert source.key_columns() == ["id"]
        on_source, on_target = both_ways(source, sink, table, bounds, COLUMNS)
    finally:
        sink.close()
        source.close()

    assert on_source == on_target
    for one in bounds:
        day = one.label.removeprefix("day=")
        assert on_source[one.label] == expected([r for r in ROWS if r[1] == day], [0, 2, 3]), one.label


@pytest.mark.service
@pytest.mark.parametrize("target", ["chdb", "server"])
def test_sql_server_and_clickhouse_compute_the_same_fingerprint_of_the_same_rows(
    target: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tds_emulator: EndpointDescriptor,
    tds_orders_source: str,
) -> None:
    """The emulator's ``dbo.orders`` by day (``int`` ids), and ``dbo.big_numbers`` whole (a ``bigint`` past
    2**53 beside a NULL). The emulator reports no primary key (a route there finds ``id`` in
    ``sink.order_by``), so the columns are named here."""
    endpoint, connection, table = target_for(target, tmp_path, request, monkeypatch, "tds_keys")
    big_table = table + "_big"
    for name, source_lines, partitioning, into, order_by in (
        ("days", tds_orders_source, "{kind: day, column: order_date}", table, "[order_date, id]"),
        (
            "big",
            f"  type: mssql\n  connection: tds_source\n  table: dbo.{tds_emulator_data.BIG_NUMBERS_TABLE}",
            "{kind: none}",
            big_table,
            "[id]",
        ),
    ):
        (tmp_path / f"{name}.yaml").write_text(
            f"""
kind: native_transfer
name: tds_{name}
source:
{source_lines}
  partitioning: {partitioning}
sink: {{type: clickhouse, connection: "{connection}", table: {into}, strategy: incremental_append,
        order_by: {order_by}}}
checkpoints: {{connection: "sqlite:///state_{name}.sqlite"}}
""",
            encoding="utf-8",
        )
        dpone("run", str(tmp_path / f"{name}.yaml"))

    days = committed_bounds(tmp_path / "days.yaml")
    orders = MssqlSource(tds_emulator, SourceSpec(type=SourceType.MSSQL, connection="t", table="dbo.orders"))
    big = MssqlSource(
        tds_emulator,
        SourceSpec(type=SourceType.MSSQL, connection="t", table=f"dbo.{tds_emulator_data.BIG_NUMBERS_TABLE}"),
    )
    whole = PartitionBounds(kind=BoundsKind.ALL, label="all")
    sink = ClickHouseSink(endpoint)
    try:
        on_source, on_target = both_ways(orders, sink, table, days, ["id"])
        big_source, big_target = both_ways(big, sink, big_table, [whole], ["id", "big"])
    finally:
        sink.close()
        orders.close()
        big.close()

    assert len(days) == tds_emulator_data.DAYS and on_source == on_target
    served = tds_emulator_data.orders_rows()
    for one in days:
        rows = [(r["id"],) for r in served if one.label.endswith(r["order_date"].isoformat())]
        assert on_source[one.label] == expected(rows, [0]), one.label
    assert big_source == big_target
    assert big_source["all"] == expected([(i, b) for i, b, _ in tds_emulator_data.BIG_NUMBERS_ROWS], [0, 1])
