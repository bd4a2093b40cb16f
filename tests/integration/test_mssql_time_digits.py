"""Why a SQL Server ``time`` column is audited for a seventh digit: pymssql cannot read one.

SQL Server's ``time`` is ``time(7)`` unless declared otherwise: 100-nanosecond units. pymssql decodes the
wire value into Python's ``datetime.time``, which holds microseconds, so ``10:00:00.1234567`` arrives as
``10:00:00.123456``, with no error: moved as is, the target's text would silently differ from the source.
The TDS emulator's ``dbo.clocks`` sends ``time(7)`` values exactly as a server does (``TIMEN``, scale 7),
read here through dpone's own connection. The audit that stops such a run before arming is
``value_audit.mssql_checks`` (its T-SQL needs a real server; ``tests/unit/test_mssql_types.py``).
"""

from __future__ import annotations

from datetime import time

import pytest

from airflow_provider_dpone.adapters.sources.column_values import converter_for
from airflow_provider_dpone.adapters.sources.mssql_connect import connect
from airflow_provider_dpone.adapters.sources.mssql_types import column_spec
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.conftest import tds_emulator_data

pytestmark = pytest.mark.service


def test_pymssql_drops_the_seventh_digit_of_a_time_which_the_audit_exists_to_stop(
    tds_emulator: EndpointDescriptor,
) -> None:
    connection = connect(tds_emulator)
    try:
        cursor = connection.cursor()
        cursor.execute(f"SELECT id, clock FROM dbo.{tds_emulator_data.CLOCKS_TABLE} ORDER BY id")
        read = [clock for _, clock in cursor.fetchall()]
    finally:
        connection.close()
    sent = tds_emulator_data.CLOCK_UNITS
    assert sent[0] is not None and sent[0] % 10 != 0  # the server held a seventh digit
    assert read[0] == time(10, 0, 0, 123456)  # ... and the driver handed over six
    assert read[1] == time(10, 0, 0, 123456)  # a value that differs only in that digit reads the same
    assert read[2] == time(23, 59, 59, 999999) and read[3] is None
    # what dpone would write into the String column: six digits where the source holds seven
    convert = converter_for(column_spec("clock", "time", True), coerce=True)
    assert convert is not None
    assert list(convert(read)) == ["10:00:00.123456", "10:00:00.123456", "23:59:59.999999", None]
