"""The embedded engine counts in UTC whatever the process's ``TZ``, and the process keeps its own ``TZ``.

chDB takes its default zone from ``TZ`` once, when it loads; a part's ``toYYYYMMDD(at)`` is computed in the
zone that inserted it and a count prunes parts in the zone that counts (the black-box proof:
``tests/integration/test_datetime_partitions_any_zone.py``). Each case is a fresh interpreter: chDB loads
once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

OPEN = textwrap.dedent(
    """
    import json, sys, time
    if sys.argv[2] == "chdb-first":
        import chdb  # another library loaded the engine before dpone, in the process's zone
    from airflow_provider_dpone.adapters.clickhouse.client import open_client
    from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
    from airflow_provider_dpone.contracts.errors import DponeError
    endpoint = EndpointDescriptor(
        name="t", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=sys.argv[1]
    )
    try:
        client = open_client(endpoint)
    except DponeError as err:
        print(json.dumps({"error": err.code.value, "cause": err.details.get("cause")}))
    else:
        engine = client.command("SELECT timezone()")
        print(json.dumps({"engine": engine, "process": time.strftime("%Z", time.localtime(1793574000))}))
    """
)


def _open(tmp_path: Path, zone: str, how: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", OPEN, str(tmp_path / "clickhouse"), how],
        env={**os.environ, "TZ": zone},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_engine_runs_in_utc_while_the_process_keeps_its_own_zone(tmp_path: Path) -> None:
    assert _open(tmp_path, "America/New_York", "dpone") == {"engine": "UTC", "process": "EST"}


def test_an_invalid_process_zone_does_not_stop_the_engine_from_loading(tmp_path: Path) -> None:
    """A POSIX ``TZ`` chDB cannot read made it fail to load, reported as a missing extra."""
    assert _open(tmp_path, "EST5EDT,M3.2.0,M11.1.0", "dpone")["engine"] == "UTC"


def test_an_engine_another_library_loaded_in_another_zone_is_refused_before_any_read(tmp_path: Path) -> None:
    assert _open(tmp_path, "Asia/Kolkata", "chdb-first") == {
        "error": "connection_invalid",
        "cause": "embedded_zone_not_utc",
    }
    assert _open(tmp_path, "UTC", "chdb-first")["engine"] == "UTC"
