"""A reverse HTTP proxy that speaks HTTP/1.0 to the ClickHouse server, as nginx does by default
(``proxy_http_version 1.0``), and can cut chosen answers, for fault tests (modelled on helper-167's
``h10proxy.py``).

Asked over HTTP/1.0 the server ends each answer by closing its connection, so to the proxy an answer cut
short upstream is an ordinary end: the proxy re-frames whatever arrived as a complete HTTP/1.1 chunked
answer with a proper terminator, as nginx does. An answer cut right after its headers therefore reaches the
client as a whole ``200 OK`` with an EMPTY body, which clickhouse-connect reads as a result of no rows.
:meth:`Http10Proxy.cut` names the statements whose answer loses its body (every substring must occur).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import unquote_plus

from tests.loopback_proxy import LoopbackProxy

_HOP_BY_HOP = ("connection", "keep-alive", "proxy-connection", "transfer-encoding", "content-length")


class Http10Proxy(LoopbackProxy):
    """Listens on 127.0.0.1 (``port``); one request per client connection, answered ``Connection: close``."""

    def __init__(self, host: str, upstream_port: int) -> None:
        self.requests = 0
        #: the statements (their first 200 characters) whose answer was cut
        self.cut_statements: list[str] = []
        self._rules: list[tuple[tuple[str, ...], int]] = []
        self._lock = threading.Lock()
        super().__init__(host, upstream_port, backlog=32)

    def cut(self, *parts: str, times: int = 1) -> None:
        """Deliver the answer to the next ``times`` statements holding every one of ``parts`` without its
        body (headers and the chunked terminator only)."""
        with self._lock:
            self._rules.append((parts, times))

    def _cuts(self, statement: str) -> bool:
        with self._lock:
            for index, (parts, times) in enumerate(self._rules):
                if times > 0 and all(part in statement for part in parts):
                    self._rules[index] = (parts, times - 1)
                    self.cut_statements.append(statement[:200])
                    return True
        return False

    def _serve(self, conn: socket.socket) -> None:
        try:
            request = _read_request(conn)
            if request is None:
                return
            line, headers, body = request
            with self._lock:
                self.requests += 1
            method, target, _ = line.split(" ", 2)
            kept = [h for h in headers if h.split(":", 1)[0].strip().lower() not in _HOP_BY_HOP]
            head = f"{method} {target} HTTP/1.0\r\n" + "".join(h + "\r\n" for h in kept)
            head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            with socket.create_connection(self.upstream) as upstream:
                upstream.sendall(head.encode("latin-1") + body)
                answer = b""
                while data := upstream.recv(65536):
                    answer += data  # close-delimited: the end of the answer is the end of the connection
            status_head, _, answer_body = answer.partition(b"\r\n\r\n")
            statement = unquote_plus(target) + "\n" + body[:4000].decode("latin-1", "replace")
            if self._cuts(statement):
                answer_body = b""
            lines = status_head.decode("latin-1").split("\r\n")
            passed = [h for h in lines[1:] if h.split(":", 1)[0].strip().lower() not in _HOP_BY_HOP]
            framed = f"HTTP/1.1 {lines[0].split(' ', 1)[1]}\r\n" + "".join(h + "\r\n" for h in passed)
            framed += "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            out = framed.encode("latin-1")
            if answer_body:
                out += f"{len(answer_body):x}\r\n".encode() + answer_body + b"\r\n"
            conn.sendall(out + b"0\r\n\r\n")
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.close()


def _read_request(conn: socket.socket) -> tuple[str, list[str], bytes] | None:
    """The request line, headers and whole body (``Content-Length`` or chunked); None when none came."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        data = conn.recv(65536)
        if not data:
            return None
        buffer += data
    head, _, buffer = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = [h for h in lines[1:] if h]
    named = {h.split(":", 1)[0].strip().lower(): h.split(":", 1)[1].strip() for h in headers}

    def fill(size: int) -> None:
        nonlocal buffer
        while len(buffer) < size and (data := conn.recv(65536)):
            buffer += data

    if "content-length" in named:
        size = int(named["content-length"])
        fill(size)
        return lines[0], headers, buffer[:size]
    body = b""
    if named.get("transfer-encoding", "").lower() == "chunked":
        while True:
            while b"\r\n" not in buffer and (data := conn.recv(65536)):
                buffer += data
            size_line, _, buffer = buffer.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            fill(size + 2)
            if size == 0:
                break
            body += buffer[:size]
            buffer = buffer[size + 2 :]
    return lines[0], headers, body
