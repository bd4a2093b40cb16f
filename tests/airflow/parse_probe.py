"""Import one DAG file under a Python audit hook and print, as JSON, every forbidden side effect seen.

Run as ``python parse_probe.py DAG_FILE`` in a fresh process. Airflow itself is warmed up first: it is
imported and a throwaway cron-scheduled DAG is built, because Airflow's own lazy start-up has side effects
that are not the DAG file's doing (importing croniter runs ``platform.architecture()``, which spawns
``file``). The hook is installed just before the DAG file is executed, so everything the DAG file and the
dpone modules it imports do is watched.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

WATCHED_EVENTS = (
    "socket.connect",
    "subprocess.Popen",
    "os.system",
    "os.posix_spawn",
    "os.fork",
    "os.forkpty",
)
WATCHED_PREFIXES = ("os.exec", "os.spawn")
MANIFEST_SUFFIXES = (".yaml", ".yml")
VENDOR_MODULES = ("chdb", "clickhouse_connect", "pymssql", "psycopg2")


def _warm_up_airflow() -> None:
    from datetime import datetime

    try:
        from airflow.sdk import DAG
    except ImportError:  # Airflow 2
        from airflow import DAG  # type: ignore[no-redef,attr-defined]
    DAG(dag_id="dpone_probe_warm_up", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False)


def main(dag_file: str) -> int:
    _warm_up_airflow()

    seen: list[dict[str, str]] = []

    def audit(event: str, args: tuple[object, ...]) -> None:
        if event in WATCHED_EVENTS or event.startswith(WATCHED_PREFIXES):
            # the first argument only (executable, address): never the environment a spawn would pass
            seen.append({"event": event, "detail": repr(args[0])[:200] if args else ""})
        elif event == "open" and args:
            path = args[0]
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if isinstance(path, str) and path.lower().endswith(MANIFEST_SUFFIXES):
                seen.append({"event": "open", "detail": path})

    vendor_before = {name for name in VENDOR_MODULES if name in sys.modules}
    sys.addaudithook(audit)
    spec = importlib.util.spec_from_file_location("dpone_parse_probe_dag", dag_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag_ids = sorted(value.dag_id for value in vars(module).values() if type(value).__name__ == "DAG")
    vendor_after = sorted(
        name for name in VENDOR_MODULES if name in sys.modules and name not in vendor_before
    )
    print(json.dumps({"events": seen, "dag_ids": dag_ids, "vendor_modules": vendor_after}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
