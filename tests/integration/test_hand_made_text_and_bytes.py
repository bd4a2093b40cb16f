"""Text and raw bytes in one column, into hand-made target types that have no Arrow form.

SQLite keeps a blob as stored in any column (a ``TEXT`` one included), and the source hands it over as
``bytes``. Into a column type with no Arrow form (``LowCardinality(String)`` on the 18.16 server, a zoned
``DateTime`` beside the text on chDB) the block went through clickhouse-connect's own encoder, which picks
str or bytes from the first value and failed on the other: inside the target call, after part of the rows
were written, and the route was blocked. Every value is compared, as hex, with the source's bytes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.integration.hand_made_target_rig import PATHS, create_target, query_rows, run, target_for

#: (id, day, payload): text, bytes that are not UTF-8, bytes that are, and NULL, over two days
ROWS = [
    (1, "2026-10-10", "text-1"),
    (2, "2026-10-10", b"\xff\x00"),
    (3, "2026-10-10", "caf\u00e9"),
    (4, "2026-10-11", b"abc"),
    (5, "2026-10-11", None),
    (6, "2026-10-11", b"\xc3\x28blob"),
]


def hex_of(value: str | bytes | None) -> str | None:
    if value is None:
        return None
    return (value.encode("utf-8") if isinstance(value, str) else value).hex().upper()


@pytest.mark.parametrize("declared", ["TEXT", "BLOB"])
@pytest.mark.parametrize(("export", "load"), PATHS)
@pytest.mark.parametrize("target", ["chdb", "server"])
def test_text_and_bytes_in_one_column_arrive_exactly_in_a_type_without_an_arrow_form(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    export: str,
    load: str,
    declared: str,
) -> None:
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute(
            f"CREATE TABLE notes (id INTEGER PRIMARY KEY, d DATE NOT NULL, at DATETIME NOT NULL, payload {declared})"
        )
        db.executemany(
            "INSERT INTO notes VALUES (?, ?, ? || ' 08:00:00', ?)", [(i, d, d, p) for i, d, p in ROWS]
        )
    endpoint, connection, table = target_for(target, tmp_path, request, monkeypatch, "notes")
    text_type = "LowCardinality(Nullable(String))" if target == "server" else "Nullable(String)"
    stamp = "DateTime" if target == "server" else "DateTime('UTC')"  # a zoned one has no Arrow form on chDB
    create_target(endpoint, table, f"id Int64, d Date, at {stamp}, payload {text_type}", "(d, id)")
    manifest = tmp_path / "notes.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: notes
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: notes
  partitioning: {{kind: day, column: d}}
  export: {export}
sink: {{type: clickhouse, connection: {connection}, table: {table}, strategy: incremental_append, load: {load}}}
checkpoints: {{connection: sqlite:///state.sqlite}}
""",
        encoding="utf-8",
    )

    assert run(manifest, "r1").rows_committed == len(ROWS)  # red before: target_load_failed, route blocked

    landed = dict(query_rows(endpoint, f"SELECT id, if(isNull(payload), NULL, hex(payload)) FROM {table}"))
    assert landed == {i: hex_of(value) for i, _, value in ROWS}
