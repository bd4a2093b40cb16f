"""SQLite ``orders`` tables (clean, spoilable, or demo-sized) and their source spec, for value-audit tests."""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import date, timedelta
from pathlib import Path

from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind, SourceSpec, SourceType

#: the first day of every table here
FIRST = date(2026, 11, 1)
#: ``spoilable_orders``: DAYS days of PER_DAY rows
DAYS = 8
PER_DAY = 25
#: ``many_orders``: its rows spread over this many days
MANY_ORDERS_DAYS = 10

#: cells a hypothesis example may spoil: (column, SQL literal), each refused for its own reason
BAD_CELLS = (
    ("amount", "'x'"),
    ("amount", "1.005"),
    ("updated_at", "'2026-11-01 10:00:00.5'"),
    ("updated_at", "'yesterday'"),
    ("order_date", "'2026-11-01x'"),
    ("qty", "'7'"),
)


def orders_spec() -> SourceSpec:
    return SourceSpec(
        type=SourceType.SQLITE,
        connection="sqlite:///x",
        table="orders",
        partitioning=Partitioning(kind=PartitionKind.DAY, column="order_date"),
    )


def spoilable_orders(path: Path, spoiled: dict[int, tuple[str, str]] | None = None) -> None:
    """DAYS days of PER_DAY clean rows (ids rising with the date); ``spoiled``: row id -> (column, literal)."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date DATE NOT NULL, customer TEXT NOT NULL,"
            " amount NUMERIC(12,2) NOT NULL, updated_at DATETIME NOT NULL, qty INTEGER)"
        )
        db.execute("CREATE INDEX orders_order_date_id ON orders (order_date, id)")
        db.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)",
            (
                (
                    i,
                    (FIRST + timedelta(days=i // PER_DAY)).isoformat(),
                    f"customer-{i % 7}",
                    i * 1.25,
                    f"{(FIRST + timedelta(days=i // PER_DAY)).isoformat()} {i % 24:02d}:{i % 60:02d}:00",
                    i,
                )
                for i in range(PER_DAY * DAYS)
            ),
        )
        for row_id, (column, literal) in (spoiled or {}).items():
            db.execute(f"UPDATE orders SET {column} = {literal} WHERE id = ?", (row_id,))


def many_orders(path: Path, rows: int) -> None:
    """The demo shape: rows spread over MANY_ORDERS_DAYS days, ids rising with the date, indexed on
    (order_date, id)."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date DATE NOT NULL, customer TEXT NOT NULL,"
            " amount NUMERIC(12,2) NOT NULL, updated_at DATETIME NOT NULL)"
        )
        db.execute("CREATE INDEX orders_order_date_id ON orders (order_date, id)")
        per_day = rows // MANY_ORDERS_DAYS
        db.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
            (
                (
                    i,
                    (FIRST + timedelta(days=i // per_day)).isoformat(),
                    f"customer-{i % 997}",
                    f"{i % 100000}.{i % 100:02d}",
                    f"{(FIRST + timedelta(days=i // per_day)).isoformat()} {i % 24:02d}:{i % 60:02d}:00",
                )
                for i in range(per_day * MANY_ORDERS_DAYS)
            ),
        )
