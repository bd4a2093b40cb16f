"""An HTTP connection pool whose every request carries ``readonly=1`` as its last URL parameter.

clickhouse-connect sends its start-up queries (``SELECT version(), timezone()``, the settings lookup)
before any setting of the caller applies. Rewriting the URL where every request leaves the driver (the
pool's ``urlopen``) covers those too, and any request a later driver version adds. ``readonly=1`` goes
last so it wins over every earlier parameter (the connection's ``session_settings``, the driver's own
defaults); a ``readonly`` the URL already carried is dropped first. ``1``, not ``2``: with ``2`` a query
may set it back.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from urllib3 import PoolManager

READONLY_PARAM = ("readonly", "1")


def with_readonly(url: str) -> str:
    """``url`` with any ``readonly`` parameter removed and ``readonly=1`` appended."""
    parts = urlsplit(url)
    params = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != READONLY_PARAM[0]]
    params.append(READONLY_PARAM)
    return urlunsplit(parts._replace(query=urlencode(params)))


class ReadOnlyPoolManager(PoolManager):
    """A ``urllib3`` pool manager that makes every request it sends read-only on a ClickHouse server."""

    def urlopen(self, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:  # type: ignore[override]
        return super().urlopen(method, with_readonly(url), redirect=redirect, **kw)

    def release(self) -> None:
        release_pool(self)


def release_pool(manager: PoolManager) -> None:
    """Close a client's own pool's sockets and drop the driver's registry entry (the client does not own
    a pool it was given)."""
    from clickhouse_connect.driver import httputil

    manager.clear()
    httputil.all_managers.pop(manager, None)
