"""A forward HTTP proxy for tests, the only way to one real server: every absolute-URI request
(``POST http://any-host:port/...``) and every ``CONNECT`` tunnel goes to that server's port, whatever host
the client named, so a client that bypasses the proxy (and resolves the host itself) cannot reach it."""

from __future__ import annotations

import base64
import re
import socket

from tests.loopback_proxy import LoopbackProxy

_ABSOLUTE = re.compile(rb"(^|\r\n)(GET|POST|HEAD) http://[^/ ?]+/?")
_CONNECT = b"CONNECT "
_HEAD_END = b"\r\n\r\n"


class ForwardProxy(LoopbackProxy):
    """Counts what it forwarded: ``requests`` (absolute-URI requests) and ``tunnels`` (``CONNECT``); with
    ``login`` (``user:password``), answers a request or tunnel without it in ``Proxy-Authorization`` with
    ``407`` and counts it in ``refused``."""

    def __init__(self, host: str, upstream_port: int, login: str | None = None) -> None:
        self.requests = 0
        self.tunnels = 0
        self.refused = 0
        self.login = login
        self._login = None if login is None else b"Basic " + base64.b64encode(login.encode())
        self._tunnelled: set[socket.socket] = set()
        self._heads: dict[socket.socket, bytes] = {}
        super().__init__(host, upstream_port)

    def client_chunk(self, chunk: bytes, client: socket.socket, upstream: socket.socket) -> bytes | None:
        if client in self._tunnelled:
            return chunk  # the client's TLS, passed as it is
        head = self._heads.pop(client, b"") + chunk
        if head.startswith(_CONNECT) or _CONNECT.startswith(head):
            if _HEAD_END not in head:
                self._heads[client] = head  # a client may send the request line and its headers apart
                return b""
            end = head.index(_HEAD_END) + len(_HEAD_END)
            if not self._logged_in(head[:end], client):
                return None
            self.tunnels += 1
            self._tunnelled.add(client)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            return head[end:]
        rewritten, found = _ABSOLUTE.subn(lambda m: m.group(1) + m.group(2) + b" /", head, count=1)
        if found and not self._logged_in(head, client):
            return None
        self.requests += found
        return rewritten

    def _logged_in(self, head: bytes, client: socket.socket) -> bool:
        if self._login is None or b"\r\nproxy-authorization: " + self._login.lower() in head.lower():
            return True
        self.refused += 1
        client.sendall(
            b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        return False
