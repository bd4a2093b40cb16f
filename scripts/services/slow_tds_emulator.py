"""A TDS emulator that answers slowly: what proves a SQL Server ``query_timeout`` / ``login_timeout``.

It is ``tds_emulator.build_server`` (the same login, ``dbo.orders``) plus ``dbo.slow_orders``: the same
rows, but a statement that reads it and matches ``--slow-match`` (a regular expression, default: every
statement) is answered only after ``--delay`` seconds. The emulator builds a whole result before it sends
it, so "rows produced with a delay" means the statement's answer is held back, which is what a client's
statement timeout sees of a slow server. ``--slow-match`` picks which statements are slow, so a test can
let the planning queries through and hold back one partition's read (mid-read), or hold back planning.

``--silent-login`` serves no TDS at all: it accepts TCP connections and never answers, so a client's login
timeout (not its connect timeout) is what ends the wait.

Runs as its own process (``python slow_tds_emulator.py --port-file F``), as the plain emulator does, so a
client blocked in pymssql never starves it and a test can kill it.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tds_emulator

SLOW_TABLE = "slow_orders"
_MENTIONS_SLOW = re.compile(rf"\b{SLOW_TABLE}\b", re.IGNORECASE)


def slow_handler(answer: Any, delay_s: float, slow_match: re.Pattern[str]) -> Any:
    """``answer`` (the catalog's query handler) with statements on ``dbo.slow_orders`` held back."""

    def handle(request: Any) -> Any:
        sql = request if isinstance(request, str) else request.sql
        if _MENTIONS_SLOW.search(sql) and slow_match.search(sql):
            time.sleep(delay_s)
        return answer(_renamed(request))

    return handle


def _renamed(request: Any) -> Any:
    """The request with ``slow_orders`` read as ``orders`` (the rows are the same table's)."""
    from dataclasses import replace

    if isinstance(request, str):
        return _MENTIONS_SLOW.sub(tds_emulator.TABLE, request)
    return replace(request, sql=_MENTIONS_SLOW.sub(tds_emulator.TABLE, request.sql))


def build_slow_server(host: str, port: int, delay_s: float, slow_match: str) -> Any:
    server = tds_emulator.build_server(host, port)
    server.query_handler = slow_handler(server.query_handler, delay_s, re.compile(slow_match, re.DOTALL))
    return server


def serve_silently(host: str, port: int) -> tuple[socket.socket, int]:
    """A listening socket whose connections are accepted and never answered (held until the peer leaves)."""
    listener = socket.create_server((host, port))
    return listener, listener.getsockname()[1]


def _hold(listener: socket.socket) -> None:
    held: list[socket.socket] = []
    while True:
        conn, _ = listener.accept()
        held.append(conn)  # never read, never answered: the client's login waits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", type=Path, help="write the bound port here once listening")
    parser.add_argument("--delay", type=float, default=30.0, help="seconds a slow statement is held back")
    parser.add_argument(
        "--slow-match", default=".", help="regular expression: which statements on slow_orders are slow"
    )
    parser.add_argument("--silent-login", action="store_true", help="accept TCP, never answer TDS")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if args.silent_login:
        listener, bound = serve_silently(args.host, args.port)
        server: Any = None
    else:
        server = build_slow_server(args.host, args.port, args.delay, args.slow_match)
        bound = server.address[1]
    if args.port_file is not None:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(str(bound))
        os.replace(tmp, args.port_file)  # atomic: a reader never sees a half-written port
    print(f"slow tds emulator listening on {args.host}:{bound}", flush=True)
    if server is None:
        thread = threading.Thread(target=_hold, args=(listener,), daemon=True)
        thread.start()
        thread.join()
        return 0
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
