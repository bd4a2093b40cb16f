"""The writing client's HTTP pool: a statement that changes the server is sent once, on a new connection.

clickhouse-connect sends a request again when its connection is closed or reset before the answer arrives,
on the assumption that "ClickHouse should not have processed anything on a connection that it killed". A
connection lost *after* the server applied an ``INSERT``, an ``INSERT ... SELECT`` or an ``ATTACH ...
FROM`` (a proxy or load balancer dropping it, a network fault) was sent again and applied twice: every
load path against 18.16 ended with each row held twice and exit 0 (no deduplication token stops a second
insert there, and none applies to ``ATTACH``). Here a request whose statement is not a read goes out on a
new connection (never an idle keep-alive socket the server may have closed, the case the re-send exists
for), and a connection lost under it fails the call (:class:`AnswerLost`) instead of sending it again: the
target call fails, the guard keeps the partition armed (``target_outcome_unknown``) and the runbook's
counts decide. Reads keep the driver's re-send: sent twice, they change nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from urllib3 import PoolManager, ProxyManager
from urllib3.exceptions import HTTPError
from urllib3.util.retry import Retry

from airflow_provider_dpone.adapters.clickhouse.readonly_pool import pool_for, release_pool

#: First words of the statements that change nothing on the server (anything else is taken as a write).
READ_STATEMENTS = frozenset({"SELECT", "WITH", "DESCRIBE", "DESC", "SHOW", "EXISTS", "EXPLAIN"})
#: How much of a body is read to find its statement's first word.
_HEAD_BYTES = 64


#: urllib3's retries of a write: a connection that could not be opened (nothing was sent) once more; nothing
#: after sending. Its default re-sent any method after an error it does not count as a read error (a TLS
#: error reading the answer: rows twice, exit 0, seen over HTTPS) and followed a 307/308 with the same body.
SENT_ONCE = Retry(total=1, connect=1, read=0, other=0, status=0, redirect=0, raise_on_redirect=False)


class AnswerLost(HTTPError):
    """A request that may have changed the server lost its connection before the answer: never re-sent."""


def statement_head(url: str, body: Any) -> str:
    """The first word of the statement a request carries (its ``query`` URL parameter, else the start of a
    body given as bytes or text), upper-cased; ``""`` where none can be read (a streamed body)."""
    for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if name == "query":
            return _first_word(value)
    if isinstance(body, bytes | bytearray | memoryview):
        return _first_word(bytes(body[:_HEAD_BYTES]).decode("latin-1"))
    if isinstance(body, str):
        return _first_word(body[:_HEAD_BYTES])
    return ""


def _first_word(text: str) -> str:
    words = text.lstrip(" \t\r\n(").split(None, 1)
    return words[0].rstrip("(").upper() if words else ""


def is_read(method: str, url: str, body: Any) -> bool:
    """Whether a request can only read: a ``GET`` (the server refuses writes over it, and the driver's
    ping), or a statement whose first word is a read's. Unknown is a write."""
    return method.upper() == "GET" or statement_head(url, body) in READ_STATEMENTS


def _send_once(
    manager: PoolManager,
    opener: Callable[..., Any],
    method: str,
    url: str,
    redirect: bool,
    kw: dict[str, Any],
) -> Any:
    """``opener`` (the manager's own ``urlopen``) for a read; for anything else, once, on a new connection."""
    if is_read(method, url, kw.get("body")):
        return opener(method, url, redirect=redirect, **kw)
    manager.clear()  # no idle socket the server may have closed since: a new connection
    kw["retries"] = SENT_ONCE  # urllib3 itself re-sent a POST after a TLS error or on a 307/308
    try:
        return opener(method, url, redirect=False, **kw)
    except HTTPError as lost:  # not a "remote close" to the driver: it raises instead of re-sending
        raise AnswerLost(
            "the connection ended before the server answered a request that may have changed the target"
        ) from lost


class WritePoolManager(PoolManager):
    """A ``urllib3`` pool manager that sends a request changing the server once, on a new connection."""

    def urlopen(self, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:  # type: ignore[override]
        return _send_once(self, super().urlopen, method, url, redirect, kw)

    def release(self) -> None:
        release_pool(self)


class WriteProxyManager(ProxyManager):
    """The same, through the HTTP(S) proxy the environment names for the server (``http_proxy`` ...)."""

    def urlopen(self, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:  # type: ignore[override]
        return _send_once(self, super().urlopen, method, url, redirect, kw)

    def release(self) -> None:
        release_pool(self)


def write_pool(*, secure: bool, host: str, port: int, verify: bool) -> PoolManager:
    """The writing client's pool: through the proxy the environment names for ``host:port``, as the driver
    would pick it (``*_proxy``, ``no_proxy``), or direct."""
    return pool_for(WritePoolManager, WriteProxyManager, secure=secure, host=host, port=port, verify=verify)
