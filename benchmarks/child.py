"""Entry point of one measurement in a fresh process: ``python child.py SPEC_JSON``.

Prints one JSON line with what was moved and the in-process timings. Each kind's module imports what it
needs before its clock starts, so ``seconds`` is the work itself; the parent adds the end-to-end numbers.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main(argv: list[str]) -> int:
    spec: dict[str, Any] = json.loads(argv[1])
    kind = spec["kind"]
    if kind == "dpone":
        from transfer_dpone import run_dpone

        result = run_dpone(spec)
    elif kind == "raw":
        from transfer_raw import run_raw

        result = run_raw(spec)
    elif kind in ("generic_transfer", "hand_written"):
        from transfer_airflow import run_peer

        result = run_peer(spec)
    elif kind == "guard":
        from guard_overhead import run_guard

        result = run_guard(spec)
    elif kind in ("limit_chdb", "limit_http"):
        from transfer_limits import run_limit_chdb, run_limit_http

        result = run_limit_chdb(spec) if kind == "limit_chdb" else run_limit_http(spec)
    elif kind == "route_scan":
        from route_scan import run_route_scan

        result = run_route_scan(spec)
    elif kind in ("pymssql_fetch", "mssql_read", "dpone_mssql"):
        import transfer_mssql

        result = getattr(transfer_mssql, f"run_{kind}")(spec)
    elif kind == "reader":
        from reader_time import run_reader

        result = run_reader(spec)
    else:
        raise SystemExit(f"unknown measurement kind {kind!r}")
    result["peak_rss_mb"] = _peak_rss_mb()
    if spec.get("checksum"):  # after the measured work and the peak: what the target now holds
        from checksum import read_target

        result["checksum"] = read_target(spec["checksum"]["target"], spec["checksum"]["table"])
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


def _peak_rss_mb() -> float | None:
    """This process's own high-water RSS (``VmHWM``). ``ru_maxrss`` from ``wait4`` is not: Linux carries the
    forking parent's RSS over into the child's, so a small child of a large harness reads as large."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError):
        return None
    return None


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
