"""The worker's own HTTP calls to a ClickHouse server: every request carries ``readonly=1``.

The client library's start-up queries (``SELECT version(), timezone()``, the settings lookup) went out
without ``readonly=1`` before any setting of ours applied. Here the worker sends exactly its own three
generated statements (the read-back of ``readonly``, the column-type lookup, the measuring SELECT), each
as one stateless POST whose URL carries ``readonly=1`` (no session, so nothing can carry over from one
request to the next). Nothing else is sent.

Where the parent's environment names an HTTP proxy for the server (``*_proxy``, ``no_proxy``, resolved
there as the sink resolves it), every request goes through it: a plain one as an absolute-URI request to
the proxy, a TLS one through a ``CONNECT`` tunnel. Going direct instead read another server than the load
wrote (a proxy leading elsewhere) or none (a server reachable only through the proxy), and the route
blocked after every publication. Only an ``http://`` proxy is spoken; any other fails the observation.

Failures keep clickhouse-connect's exception classes, so the worker classifies them in one place: a
server answer is a ``DatabaseError`` carrying the server's error code, a transport failure (refused,
reset, timed out, cut mid-answer) an ``OperationalError``.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor

#: The setting every request carries. ``1``, not ``2``: on 18.16 ``readonly=2`` lets a query set it back.
READONLY_PARAMS = (("readonly", "1"),)
USER_AGENT = "dpone-target-reader/1"
#: Largest answer body read (the measuring SELECT answers one row; the type lookup one row a column).
MAX_BODY_BYTES = 8 * 1024 * 1024
_CODE_RE = re.compile(r"\bCode: ([0-9]{1,5})[.,]")


@dataclass(frozen=True)
class Result:
    result_rows: list[tuple[Any, ...]]


class ReadOnlyHttpClient:
    """A minimal ClickHouse HTTP client for the worker: ``query(sql).result_rows``, ``command``, ``close``."""

    def __init__(self, endpoint: EndpointDescriptor, deadline: float, proxy: str | None = None) -> None:
        if not endpoint.host:
            raise OperationalError("the endpoint has no host")
        self._proxy = _Proxy.parse(proxy) if proxy else None
        self._host = endpoint.host
        self._port = endpoint.port or (8443 if endpoint.secure else 8123)
        self._secure = endpoint.secure
        self._verify = endpoint.verify
        self._deadline = deadline
        # the connection's session settings as the sink uses them, then readonly=1 last, so it always wins
        params = [(k, str(v)) for k, v in endpoint.session_settings.items() if k != "readonly"]
        params += READONLY_PARAMS
        if endpoint.database:
            params.append(("database", endpoint.database))
        self._path = "/?" + urlencode(params)
        user = endpoint.user or "default"
        token = base64.b64encode(f"{user}:{endpoint.secret() or ''}".encode()).decode("ascii")
        self._headers = {
            "Authorization": f"Basic {token}",
            "User-Agent": USER_AGENT,
            "Content-Type": "text/plain; charset=utf-8",
        }
        if self._proxy is not None and not self._secure:
            self._headers.update(self._proxy.headers)  # a tunnel sends them in its CONNECT instead

    def query(self, sql: str) -> Result:
        body = self._post(sql + "\nFORMAT JSONCompact")
        try:
            answer = json.loads(body)
            rows = answer["data"]
        except (ValueError, KeyError, TypeError):
            raise self._server_error(body) from None  # an exception appended to a started answer
        return Result(result_rows=[tuple(row) for row in rows])

    def command(self, sql: str) -> None:
        self._post(sql)

    def close(self) -> None:
        """Nothing to close: every request used its own connection."""

    def _post(self, sql: str) -> str:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise OperationalError("the observation budget is spent")
        conn, target = self._connection(remaining)
        try:
            conn.request("POST", target, body=sql.encode("utf-8"), headers=self._headers)
            response = conn.getresponse()
            raw = response.read(MAX_BODY_BYTES + 1)
            header_code = response.getheader("X-ClickHouse-Exception-Code")
        except (OSError, http.client.HTTPException) as exc:  # TimeoutError is an OSError
            raise OperationalError("the request to the server failed") from exc
        finally:
            conn.close()
        if len(raw) > MAX_BODY_BYTES:
            raise OperationalError("the server's answer is larger than any generated SELECT returns")
        text = raw.decode("utf-8", errors="replace")
        if response.status != 200:
            raise self._server_error(text, header_code)
        return text

    def _connection(self, timeout: float) -> tuple[http.client.HTTPConnection, str]:
        """A new connection for one request, and the request target to send on it."""
        proxy = self._proxy
        if not self._secure:
            if proxy is None:
                return http.client.HTTPConnection(self._host, self._port, timeout=timeout), self._path
            conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=timeout)
            return conn, f"http://{_authority(self._host, self._port)}{self._path}"
        context = ssl.create_default_context()
        if not self._verify:  # the connection's `verify: false`, exactly as the sink connects
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if proxy is None:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, context=context
            ), self._path
        tunnel = http.client.HTTPSConnection(proxy.host, proxy.port, timeout=timeout, context=context)
        tunnel.set_tunnel(self._host, self._port, headers=proxy.headers)
        return tunnel, self._path

    @staticmethod
    def _server_error(text: str, header_code: str | None = None) -> DatabaseError:
        code: int | None = None
        if header_code and header_code.isdigit():
            code = int(header_code)
        elif found := _CODE_RE.search(text):
            code = int(found.group(1))
        if code is None:
            return OperationalError("the server's answer could not be read")
        return DatabaseError(f"Code: {code}. the server refused the request", code=code)


@dataclass(frozen=True)
class _Proxy:
    """An ``http://`` proxy: where to connect, and its credentials as a ``Proxy-Authorization`` header."""

    host: str
    port: int
    headers: dict[str, str]

    @classmethod
    def parse(cls, url: str) -> _Proxy:
        parts = urlsplit(url)
        try:
            port = parts.port or 80
        except ValueError:
            raise OperationalError("the proxy's address could not be read") from None
        if parts.scheme.lower() != "http" or not parts.hostname:
            raise OperationalError("only an http:// proxy is supported")
        headers: dict[str, str] = {}
        if parts.username is not None:
            login = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            headers["Proxy-Authorization"] = "Basic " + base64.b64encode(login.encode()).decode("ascii")
        return cls(host=parts.hostname, port=port, headers=headers)


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
