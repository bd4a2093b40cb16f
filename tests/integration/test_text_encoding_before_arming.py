"""Text that is not valid UTF-8 stops the run before arming, on every path (black-box `dpone run`, chDB).

SQLite stores whatever bytes it is given as TEXT; both reads refuse such text (the row read cannot decode
it, the Arrow read validates it). Before this check the value audit never looked at text, so on the
``lazy_plan + direct`` path the read refused it inside the guarded target call: the partitions read before
it were in the target and the route was blocked (``target_outcome_unknown``) by a value in the data. Now
the audit finds it first, on both of its forms (the Arrow proof for a table it covers, the SQL audit for
one with a flag column), names the column, never prints the value, and writes nothing. Valid text of any
script, with control characters and NULs, lands byte for byte; the hint's ``CAST(col AS BLOB)`` moves the
bytes as they are.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.sources import value_audit
from tests.builders import sqlite_day_manifest
from tests.integration.route_rig import chdb_query, checkpoint_rows, dpone

DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")
#: ``notes`` is covered by the Arrow audit; ``flagged`` has a BOOLEAN column, which only the SQL audit proves
TABLES = {
    "notes": "CREATE TABLE notes (id INTEGER PRIMARY KEY, day DATE NOT NULL, note TEXT)",
    "flagged": "CREATE TABLE flagged (id INTEGER PRIMARY KEY, day DATE NOT NULL, note TEXT, flag BOOLEAN)",
}
#: byte strings Python's strict decoder and Arrow's validation both refuse
NOT_UTF8 = {
    "a lone 0xFF": "FF",
    "a cut two-byte sequence": "C328",
    "a surrogate": "EDA080",
    "past U+10FFFF": "F4908080",
    "an overlong slash": "C0AF",
    "0xFF after a NUL": "610000FF",
}
#: valid text the check must let through untouched (hex of its UTF-8 bytes)
VALID = ("C3A9", "F09F8E89", "E4B8AD", "09610A62", "610062", "")


def make_source(base: Path, table: str) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(TABLES[table])
        for i in range(1, 31):
            flag = ", 1" if table == "flagged" else ""
            db.execute(f"INSERT INTO {table} VALUES ({i}, '{DAYS[i % 3]}', 'note {i}'{flag})")


def set_note(base: Path, table: str, hex_bytes: str, row_id: int) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(f"UPDATE {table} SET note = CAST(X'{hex_bytes}' AS TEXT) WHERE id = ?", (row_id,))


def manifest(
    base: Path, table: str, *, export: str = "lazy_plan", load: str = "direct", query: str = ""
) -> Path:
    return sqlite_day_manifest(
        base, table, state="text_encoding_state", export=export, load=load, query=query
    )


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AIRFLOW_CONN_TEXT_ENCODING_STATE", f"sqlite:///{tmp_path / 'state.sqlite'}")
    return tmp_path


def refused_before_arming(base: Path, path: Path, table: str) -> None:
    result = dpone("run", str(path), "--run-id", "bad")
    assert result.exit_code == 2, result.output
    assert "manifest_invalid" in result.output and "column 'note'" in result.output, result.output
    assert "not valid UTF-8" in result.output and "CAST(col AS BLOB)" in result.output
    assert "target_outcome_unknown" not in result.output and "Traceback" not in result.output
    assert checkpoint_rows(base) == []  # nothing armed: the route is not blocked
    assert not (base / "clickhouse").exists() or chdb_query(base, f"EXISTS TABLE demo.{table}") == [(0,)]


def source_hex(base: Path, table: str) -> list[tuple[int, str]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        return db.execute(f"SELECT id, hex(CAST(note AS BLOB)) FROM {table} ORDER BY id").fetchall()


def target_hex(base: Path, table: str) -> list[tuple[int, str]]:
    return [
        (int(i), str(h)) for i, h in chdb_query(base, f"SELECT id, hex(note) FROM demo.{table} ORDER BY id")
    ]


@pytest.mark.parametrize("table", list(TABLES))
@pytest.mark.parametrize("case", list(NOT_UTF8))
def test_text_that_is_not_utf8_exits_2_before_arming_on_the_direct_path(
    base: Path, table: str, case: str
) -> None:
    make_source(base, table)
    set_note(base, table, NOT_UTF8[case], row_id=20)  # in the second partition read: the first would land
    refused_before_arming(base, manifest(base, table), table)


@pytest.mark.parametrize("table", list(TABLES))
@pytest.mark.parametrize(("export", "load"), [("file_artifact", "direct"), ("lazy_plan", "staged")])
def test_the_paths_that_read_before_arming_refuse_it_the_same_way(
    base: Path, table: str, export: str, load: str
) -> None:
    make_source(base, table)
    set_note(base, table, "FF", row_id=20)
    refused_before_arming(base, manifest(base, table, export=export, load=load), table)


@pytest.mark.parametrize("table", list(TABLES))
def test_valid_text_of_any_script_with_controls_and_nuls_lands_byte_for_byte(base: Path, table: str) -> None:
    make_source(base, table)
    for row_id, hex_bytes in enumerate(VALID, start=2):
        set_note(base, table, hex_bytes, row_id=row_id)
    result = dpone("run", str(manifest(base, table)), "--run-id", "valid")
    assert result.exit_code == 0, result.output
    assert target_hex(base, table) == source_hex(base, table)


def test_the_hints_blob_cast_moves_the_bytes_as_they_are(base: Path) -> None:
    make_source(base, "notes")
    set_note(base, "notes", "6100FF", row_id=20)
    query = "SELECT id, day, CAST(note AS BLOB) AS note FROM notes"
    result = dpone("run", str(manifest(base, "notes", query=query)), "--run-id", "bytes")
    assert result.exit_code == 0, result.output
    assert target_hex(base, "notes") == source_hex(base, "notes")


def test_printable_ascii_text_never_reaches_the_python_check(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bytes] = []
    real = value_audit._is_utf8

    def counted(value: bytes | None) -> int:
        calls.append(value or b"")
        return real(value)

    monkeypatch.setattr(value_audit, "_is_utf8", counted)
    make_source(base, "flagged")  # the SQL audit's table
    set_note(base, "flagged", "C3A9", row_id=4)
    set_note(base, "flagged", "610062", row_id=5)
    result = dpone("run", str(manifest(base, "flagged")), "--run-id", "ascii")
    assert result.exit_code == 0, result.output
    assert sorted(calls) == [b"a\x00b", b"\xc3\xa9"]  # the 28 ASCII notes took SQLite's own test
