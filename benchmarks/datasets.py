"""Benchmark source tables: the demo ``orders`` shape and a 30-column ``wide`` shape, in SQLite and PostgreSQL.

``orders`` is exactly the table ``dpone demo`` creates (same generator). ``wide`` mixes every type the SQLite
source maps (integers, reals, two decimal scales, text of several lengths, booleans, dates, datetimes) with
about a third of its columns nullable and NULL-heavy, so the conversion paths that matter are all exercised.
Both are deterministic for (rows, seed), spread over 60 days with ids rising with the date, and indexed on
(order_date, id) like the demo, so dpone's day partitions are range scans.

The PostgreSQL copies hold the same rows (loaded with COPY) for the peers and the raw pipe.
"""

from __future__ import annotations

import csv
import io
import random
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source, demo_batches

DAYS = 60
LAST_DAY = date(2026, 11, 30)
_BATCH = 20_000


@dataclass(frozen=True)
class Column:
    name: str
    sqlite: str
    postgres: str


ORDERS_COLUMNS = (
    Column("id", "INTEGER PRIMARY KEY", "bigint PRIMARY KEY"),
    Column("order_date", "DATE NOT NULL", "date NOT NULL"),
    Column("customer", "TEXT NOT NULL", "text NOT NULL"),
    Column("amount", "NUMERIC(12,2) NOT NULL", "numeric(12,2) NOT NULL"),
    Column("updated_at", "DATETIME NOT NULL", "timestamp NOT NULL"),
)

WIDE_COLUMNS = (
    Column("id", "INTEGER PRIMARY KEY", "bigint PRIMARY KEY"),
    Column("order_date", "DATE NOT NULL", "date NOT NULL"),
    Column("updated_at", "DATETIME NOT NULL", "timestamp NOT NULL"),
    Column("qty", "INTEGER NOT NULL", "bigint NOT NULL"),
    Column("store_id", "INTEGER NOT NULL", "bigint NOT NULL"),
    Column("region_id", "INTEGER", "bigint"),
    Column("units", "INTEGER", "bigint"),
    Column("line_no", "INTEGER NOT NULL", "bigint NOT NULL"),
    Column("parent_id", "INTEGER", "bigint"),
    Column("price", "REAL NOT NULL", "double precision NOT NULL"),
    Column("weight", "REAL", "double precision"),
    Column("discount", "REAL", "double precision"),
    Column("score", "REAL", "double precision"),
    Column("amount", "NUMERIC(18,4) NOT NULL", "numeric(18,4) NOT NULL"),
    Column("tax", "NUMERIC(18,4)", "numeric(18,4)"),
    Column("fee", "NUMERIC(12,2)", "numeric(12,2)"),
    Column("customer", "TEXT NOT NULL", "text NOT NULL"),
    Column("email", "TEXT", "text"),
    Column("city", "TEXT NOT NULL", "text NOT NULL"),
    Column("country", "TEXT NOT NULL", "text NOT NULL"),
    Column("sku", "TEXT NOT NULL", "text NOT NULL"),
    Column("note", "TEXT", "text"),
    Column("status", "TEXT NOT NULL", "text NOT NULL"),
    Column("channel", "TEXT", "text"),
    Column("ref_uuid", "TEXT NOT NULL", "text NOT NULL"),
    Column("is_paid", "BOOLEAN NOT NULL", "boolean NOT NULL"),
    Column("is_gift", "BOOLEAN", "boolean"),
    Column("ship_date", "DATE", "date"),
    Column("delivered_at", "DATETIME", "timestamp"),
    Column("currency", "TEXT NOT NULL", "text NOT NULL"),
)

SHAPES: dict[str, tuple[Column, ...]] = {"orders": ORDERS_COLUMNS, "wide": WIDE_COLUMNS}

_CITIES = ("Berlin", "Zürich", "São Paulo", "Oslo", "Kraków", "Lyon", "Osaka", "Austin", "Porto", "Gent")
_COUNTRIES = ("DE", "CH", "BR", "NO", "PL", "FR", "JP", "US", "PT", "BE")
_STATUSES = ("new", "paid", "shipped", "delivered", "returned")
_CHANNELS = ("web", "store", "phone", "partner")
_CURRENCIES = ("EUR", "CHF", "USD", "BRL", "JPY")
_NOTES = (
    "leave at the back door",
    "gift wrap, no invoice in the parcel",
    "customer asked for a call before delivery; office hours only",
    "Zoë's order — fragile, handle with care",
)


def column_names(shape: str) -> tuple[str, ...]:
    return tuple(c.name for c in SHAPES[shape])


def wide_batches(rows: int, *, seed: int = 11) -> Iterator[list[tuple[Any, ...]]]:
    """Rows of the wide table in batches, built column by column (deterministic for rows and seed)."""
    rand = random.Random(seed).random
    first = LAST_DAY - timedelta(days=DAYS - 1)
    day_texts = [(first + timedelta(days=d)).isoformat() for d in range(DAYS)]
    clock = [f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}" for s in range(0, 86_400, 7)]
    uuid_rand = random.Random(seed + 1)
    for start in range(0, rows, _BATCH):
        ids = range(start + 1, min(start + _BATCH, rows) + 1)
        n = len(ids)
        days = [(i - 1) * DAYS // rows for i in ids]
        order_dates = [day_texts[d] for d in days]

        def pick(options: Sequence[Any], null_share: float = 0.0, n: int = n) -> list[Any]:
            return [None if rand() < null_share else options[int(rand() * len(options))] for _ in range(n)]

        def ints(high: int, null_share: float = 0.0, n: int = n) -> list[int | None]:
            return [None if rand() < null_share else int(rand() * high) for _ in range(n)]

        def reals(scale: float, null_share: float = 0.0, n: int = n) -> list[float | None]:
            return [None if rand() < null_share else round(rand() * scale, 3) for _ in range(n)]

        def decimals(high: int, digits: int, null_share: float = 0.0, n: int = n) -> list[float | None]:
            unit = 10**digits
            return [None if rand() < null_share else int(rand() * high * unit) / unit for _ in range(n)]

        columns: list[list[Any]] = [
            list(ids),
            order_dates,
            [f"{day} {clock[int(rand() * len(clock))]}" for day in order_dates],
            ints(50),
            ints(400),
            ints(40, 0.2),
            ints(1000, 0.3),
            ints(20),
            ints(1_000_000, 0.8),
            reals(999.0),
            reals(40.0, 0.25),
            reals(0.5, 0.5),
            reals(1.0, 0.1),
            decimals(100_000, 4),
            decimals(10_000, 4, 0.3),
            decimals(500, 2, 0.5),
            [f"customer {int(rand() * 50_000):05d}" for _ in range(n)],
            [None if rand() < 0.3 else f"user{int(rand() * 1_000_000)}@example.org" for _ in range(n)],
            pick(_CITIES),
            pick(_COUNTRIES),
            [f"SKU-{int(rand() * 99_999):05d}-{int(rand() * 99):02d}" for _ in range(n)],
            pick(_NOTES, 0.7),
            pick(_STATUSES),
            pick(_CHANNELS, 0.2),
            [str(uuid.UUID(int=uuid_rand.getrandbits(128))) for _ in range(n)],
            [int(rand() < 0.8) for _ in range(n)],
            [None if rand() < 0.4 else int(rand() < 0.1) for _ in range(n)],
            [None if rand() < 0.3 else day_texts[min(d + 1 + int(rand() * 3), DAYS - 1)] for d in days],
            [
                None
                if rand() < 0.5
                else f"{day_texts[min(d + 2, DAYS - 1)]} {clock[int(rand() * len(clock))]}"
                for d in days
            ],
            pick(_CURRENCIES),
        ]
        yield list(zip(*columns, strict=True))


def _batches(shape: str, rows: int) -> Iterator[list[tuple[Any, ...]]]:
    if shape == "orders":
        yield from demo_batches(rows)  # type: ignore[misc]
    else:
        yield from wide_batches(rows)


def create_sqlite(shape: str, path: Path, rows: int) -> Path:
    """The shape's table (named after it) in a SQLite file; reused when it already holds ``rows`` rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if shape == "orders":
        create_demo_source(path, rows)
        return path
    db = sqlite3.connect(path, isolation_level=None)
    try:
        found = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (shape,)
        ).fetchone()
        if found and db.execute(f"SELECT count(*) FROM {shape}").fetchone()[0] == rows:
            return path
        columns = SHAPES[shape]
        db.execute("BEGIN IMMEDIATE")
        db.execute(f"DROP TABLE IF EXISTS {shape}")
        db.execute(f"CREATE TABLE {shape} ({', '.join(f'{c.name} {c.sqlite}' for c in columns)})")
        insert = f"INSERT INTO {shape} VALUES ({', '.join('?' for _ in columns)})"
        for batch in _batches(shape, rows):
            db.executemany(insert, batch)
        db.execute(f"CREATE INDEX {shape}_order_date_id ON {shape} (order_date, id)")
        db.execute("COMMIT")
    finally:
        db.close()
    return path


def postgres_table(shape: str) -> str:
    return f"bench_{shape}"


def create_postgres(shape: str, dsn: str, rows: int) -> str:
    """The same rows in PostgreSQL (``bench_<shape>``), loaded with COPY; reused when the count matches."""
    import psycopg2

    table = postgres_table(shape)
    columns = SHAPES[shape]
    connection = psycopg2.connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s)", (table,))
            if cursor.fetchone()[0] is not None:
                cursor.execute(f"SELECT count(*) FROM {table}")
                if cursor.fetchone()[0] == rows:
                    return table
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
            cursor.execute(f"CREATE TABLE {table} ({', '.join(f'{c.name} {c.postgres}' for c in columns)})")
            bools = [i for i, c in enumerate(columns) if c.postgres.startswith("boolean")]
            for batch in _batches(shape, rows):
                buffer = io.StringIO()
                writer = csv.writer(buffer)
                for row in batch:
                    if bools:
                        row = tuple(
                            ("t" if v else "f") if i in bools and v is not None else v
                            for i, v in enumerate(row)
                        )
                    writer.writerow(row)
                buffer.seek(0)
                cursor.copy_expert(f"COPY {table} FROM STDIN WITH (FORMAT csv, NULL '')", buffer)
            cursor.execute(f"CREATE INDEX {table}_order_date_id ON {table} (order_date, id)")
            cursor.execute(f"ANALYZE {table}")
    finally:
        connection.close()
    return table
