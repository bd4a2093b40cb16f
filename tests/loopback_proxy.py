"""A loopback TCP proxy to a real server, for fault tests: each subclass decides what becomes of the
client's bytes (forward them, rewrite them, swallow them, or cut the connection)."""

from __future__ import annotations

import contextlib
import socket
import threading


class LoopbackProxy:
    """Listens on 127.0.0.1 (``port``) and pumps every connection to ``(host, upstream_port)``."""

    def __init__(self, host: str, upstream_port: int, *, backlog: int = 16) -> None:
        self.upstream = (host, upstream_port)
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(backlog)
        self.port = int(self.server.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def connected(self, upstream: socket.socket) -> None:
        """Called once per proxied connection, before any byte moves."""

    def client_chunk(self, chunk: bytes, client: socket.socket, upstream: socket.socket) -> bytes | None:
        """What to forward of a chunk the client sent; None ends this connection's forwarding."""
        return chunk

    def server_chunk(self, chunk: bytes, client: socket.socket, upstream: socket.socket) -> bytes | None:
        """What to forward of a chunk the server sent; None ends this connection's forwarding."""
        return chunk

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.server.close()

    def _accept(self) -> None:
        self.server.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        up = socket.create_connection(self.upstream)
        self.connected(up)

        def pump(src: socket.socket, dst: socket.socket, from_client: bool) -> None:
            try:
                while chunk := src.recv(65536):
                    if from_client:
                        forwarded = self.client_chunk(chunk, conn, up)
                    else:
                        forwarded = self.server_chunk(chunk, conn, up)
                    if forwarded is None:
                        return
                    dst.sendall(forwarded)
            except OSError:
                pass
            finally:
                for s in (conn, up):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pump, args=(up, conn, False), daemon=True).start()
        pump(conn, up, True)
