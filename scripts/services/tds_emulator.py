"""Serve a small ``dbo.orders`` table over TDS (SQL Server's wire protocol) with pysqlbridge.

The emulator lets pymssql log in and read rows for real; no SQL Server can run on these machines. It runs
as its own process (``python tds_emulator.py --port-file F``) so that a client blocked in pymssql never
starves it of the GIL, and so tests can kill it. Known emulator limits: DECIMAL comes back as float, DATE
as datetime (midnight), DATETIME2 as datetime (1/300 s ticks), and writes to served tables are refused.

The rows are deterministic (``orders_rows()``) so tests can compare what they read with what was served.
``--large-rows N`` also serves ``dbo.large_orders``: the same columns, N rows over ``LARGE_DAYS`` days, each
row a pure function of its id (``large_order_row``), so a benchmark or test can check every value or a
checksum without the emulator. Values that repeat (days, customers) are shared objects, so a million rows
hold about 200 MB in the emulator.

``dbo.big_numbers`` holds a ``bigint`` past 2**53 (``BIG_NUMBERS_ROWS``). ``dbo.clocks`` holds a SQL Server ``time(7)`` column sent as the real server sends it (``TIMEN``, scale 7:
100-nanosecond units), which pysqlbridge has no type for: what shows how pymssql reads such a value
(``CLOCK_UNITS``).
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import signal
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

USER = "dpone"
DATABASE = "pysqlbridge"  # the emulator answers DB_NAME() with its own catalog name, whatever the login asked
PASSWORD = "dpone-tds-pw"  # a throwaway credential for a loopback-only emulator
TABLE = "orders"
FIRST_DAY = datetime.date(2026, 11, 26)
DAYS = 5
ROWS = 50
CUSTOMERS = ("Acme GmbH", "Zoë Ångström", "Łódź Trading", "東京商事", "O'Brien & Sons", "Müller AG")
NULL_CUSTOMER_IDS = frozenset({7, 33})

COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "int"),
    ("order_date", "date"),
    ("customer", "nvarchar(100)"),
    ("amount", "decimal(12,2)"),
    ("updated_at", "datetime2"),
)
"""The declared (SQL Server) schema of dbo.orders; ``id`` is its primary key."""


def orders_rows() -> list[dict[str, Any]]:
    """The rows served, as SQL Server would hold them (Decimal amounts, date order_date)."""
    rows: list[dict[str, Any]] = []
    for i in range(1, ROWS + 1):
        day = FIRST_DAY + datetime.timedelta(days=(i - 1) % DAYS)
        rows.append(
            {
                "id": i,
                "order_date": day,
                "customer": None if i in NULL_CUSTOMER_IDS else CUSTOMERS[i % len(CUSTOMERS)],
                "amount": Decimal(i * 1731 % 100000) / Decimal(100),
                "updated_at": datetime.datetime.combine(day, datetime.time(8 + i % 10, i % 60, (i * 7) % 60)),
            }
        )
    return rows


CLOCKS_TABLE = "clocks"
#: ``dbo.clocks``'s values of ``clock``, in 100-nanosecond units since midnight: 10:00:00.1234567 (a seventh
#: digit), 10:00:00.1234560 (six digits), 23:59:59.9999999, and NULL.
CLOCK_UNITS: tuple[int | None, ...] = (360_001_234_567, 360_001_234_560, 863_999_999_999, None)


def _time7_type() -> Any:
    """``TIMEN`` of scale 7 (TDS type 0x29): a length byte (5) and five little-endian bytes of 100 ns units."""
    from pysqlbridge.tds.result import ColumnType

    class Time7(ColumnType):  # type: ignore[misc]
        def type_info(self) -> bytes:
            return bytes([0x29, 7])

        def encode(self, value: object) -> bytes:
            if value is None:
                return b"\x00"
            return b"\x05" + int(value).to_bytes(5, "little")  # type: ignore[call-overload]

    return Time7()


TEXTS_TABLE = "legacy_texts"
#: ``dbo.legacy_texts``: text FreeTDS cannot convert to UTF-8 beside text it can. ``latin`` is a varchar
#: under ``SQL_Latin1_General_CP1_CI_AS`` (code page 1252) holding byte 0x81, which that code page leaves
#: undefined; ``wide`` an nvarchar holding an unpaired surrogate (U+D800). Row 1 converts exactly.
TEXTS_ROWS: tuple[tuple[int, bytes | None, str | None], ...] = (
    (1, b"caf\xe9", "caf\u00e9"),
    (2, b"a\x81b", "ok"),
    (3, b"plain", "a\ud800b"),
)
_CP1252_COLLATION = bytes.fromhex("0904d00034")  # SQL_Latin1_General_CP1_CI_AS


def _cp1252_varchar_type() -> Any:
    """``BIGVARCHAR`` (TDS type 0xA7) of 100 bytes under a code-page-1252 collation: the value's raw bytes."""
    import struct

    from pysqlbridge.tds.result import ColumnType

    class Cp1252VarChar(ColumnType):  # type: ignore[misc]
        def type_info(self) -> bytes:
            return bytes([0xA7]) + struct.pack("<H", 100) + _CP1252_COLLATION

        def encode(self, value: object) -> bytes:
            if value is None:
                return b"\xff\xff"
            raw = bytes(value)  # type: ignore[call-overload]
            return struct.pack("<H", len(raw)) + raw

    return Cp1252VarChar()


BIG_NUMBERS_TABLE = "big_numbers"
#: ``dbo.big_numbers``: a ``bigint`` past 2**53 (row 2), which a coarse description's ``Float64`` cannot
#: hold exactly, beside ``float`` values.
BIG_NUMBERS_ROWS: tuple[tuple[int, int | None, float | None], ...] = (
    (1, 5, 0.5),
    (2, 2**53 + 1, 1.5),
    (3, None, None),
)

TEXT_DAYS_TABLE = "text_days"
#: ``dbo.text_days``: dates held as text, ISO (rows 1, 4, 5) and as SQL Server also reads them (rows 2, 3:
#: not zero-padded, ``CONVERT`` style 112), which a day compared as text would not select.
TEXT_DAYS_ROWS: tuple[tuple[int, str], ...] = (
    (1, "2024-01-09"),
    (2, "2024-1-5"),
    (3, "20240105"),
    (4, "2024-01-05 10:00:00"),
    (5, "2024-01-05"),
)

LARGE_TABLE = "large_orders"
LARGE_FIRST_DAY = datetime.date(2026, 9, 1)
LARGE_DAYS = 60
LARGE_NULL_EVERY = 97
"""Every 97th ``large_orders`` row has a NULL customer."""


def large_order_row(i: int) -> tuple[int, datetime.date, str | None, Decimal, datetime.datetime]:
    """Row ``i`` (1-based) of ``dbo.large_orders``, as SQL Server would hold it: (id, order_date, customer,
    amount, updated_at); rows ``1..N`` are ordered by id, ``order_date`` cycles over ``LARGE_DAYS`` days."""
    day = LARGE_FIRST_DAY + datetime.timedelta(days=(i - 1) % LARGE_DAYS)
    customer = None if i % LARGE_NULL_EVERY == 0 else CUSTOMERS[i % len(CUSTOMERS)]
    amount = Decimal(i * 7919 % 10_000_000) / Decimal(100)
    moment = datetime.datetime.combine(day, datetime.time(i % 24, (i // 24) % 60, (i * 7) % 60))
    return i, day, customer, amount, moment


def _large_values(rows: int) -> list[list[object]]:
    """``large_orders`` as the emulator serves it (datetime days, float amounts); repeated values shared."""
    days = [
        datetime.datetime.combine(LARGE_FIRST_DAY + datetime.timedelta(days=d), datetime.time())
        for d in range(LARGE_DAYS)
    ]
    values: list[list[object]] = []
    for i in range(1, rows + 1):
        _, _, customer, amount, moment = large_order_row(i)
        values.append([i, days[(i - 1) % LARGE_DAYS], customer, float(amount), moment])
    return values


def build_server(host: str, port: int, large_rows: int = 0) -> Any:
    """A pysqlbridge server holding dbo.orders (and ``large_rows`` rows of dbo.large_orders) and admitting
    one SQL login."""
    from pysqlbridge.catalog import Catalog
    from pysqlbridge.logins import Login, LoginStore
    from pysqlbridge.server import BridgeServer
    from pysqlbridge.source import Table
    from pysqlbridge.tds.result import Column, DateTime, Float, Integer, NVarChar

    columns = [
        Column("id", Integer(4)),
        Column("order_date", DateTime()),
        Column("customer", NVarChar(100)),
        Column("amount", Float(8)),
        Column("updated_at", DateTime()),
    ]
    values = [
        [r["id"], r["order_date"], r["customer"], float(r["amount"]), r["updated_at"]] for r in orders_rows()
    ]
    catalog = Catalog()
    catalog.add(Table(TABLE, columns, values))
    clocks = [[i, units] for i, units in enumerate(CLOCK_UNITS, start=1)]
    catalog.add(Table(CLOCKS_TABLE, [Column("id", Integer(4)), Column("clock", _time7_type())], clocks))
    texts = [list(row) for row in TEXTS_ROWS]
    catalog.add(
        Table(
            TEXTS_TABLE,
            [
                Column("id", Integer(4)),
                Column("latin", _cp1252_varchar_type()),
                Column("wide", NVarChar(100)),
            ],
            texts,
        )
    )
    catalog.add(
        Table(
            BIG_NUMBERS_TABLE,
            [Column("id", Integer(4)), Column("big", Integer(8)), Column("ratio", Float(8))],
            [list(row) for row in BIG_NUMBERS_ROWS],
        )
    )
    catalog.add(
        Table(
            TEXT_DAYS_TABLE,
            [Column("id", Integer(4)), Column("at", NVarChar(30))],
            [list(row) for row in TEXT_DAYS_ROWS],
        )
    )
    if large_rows > 0:
        catalog.add(Table(LARGE_TABLE, list(columns), _large_values(large_rows)))
    logins = LoginStore([Login(USER, PASSWORD, hashed=False)])
    return BridgeServer(host, port, query_handler=catalog.answer, logins=logins)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", type=Path, help="write the bound port here once listening")
    parser.add_argument(
        "--large-rows", type=int, default=0, help="also serve dbo.large_orders with this many rows"
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    server = build_server(args.host, args.port, args.large_rows)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    bound = server.address[1]
    if args.port_file is not None:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(str(bound))
        os.replace(tmp, args.port_file)  # atomic: a reader never sees a half-written port
    print(f"tds emulator listening on {args.host}:{bound}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
