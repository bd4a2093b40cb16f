"""An HTTP connection pool whose every request carries ``readonly=1`` as its last URL parameter.

clickhouse-connect sends its start-up queries (``SELECT version(), timezone()``, the settings lookup)
before any setting of the caller applies. Rewriting the URL where every request leaves the driver (the
pool's ``urlopen``) covers those too, and any request a later driver version adds. ``readonly=1`` goes
last so it wins over every earlier parameter (the connection's ``session_settings``, the driver's own
defaults); a ``readonly`` the URL already carried is dropped first. ``1``, not ``2``: with ``2`` a query
may set it back.

It goes through the HTTP(S) proxy the environment names for the server, as the driver's own pool and the
writing pool (``write_pool``) do: a read-only client that went direct while the sink went through the
proxy read another server's table, or none (a host reachable only through the proxy).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from urllib3 import PoolManager, ProxyManager

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


class ReadOnlyProxyManager(ProxyManager):
    """The same, through the HTTP(S) proxy the environment names for the server (``http_proxy`` ...)."""

    def urlopen(self, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:  # type: ignore[override]
        return super().urlopen(method, with_readonly(url), redirect=redirect, **kw)

    def release(self) -> None:
        release_pool(self)


def env_proxy(*, secure: bool, host: str, port: int) -> str | None:
    """The proxy URL the environment names for ``host:port`` (``*_proxy``, ``no_proxy``), as the driver
    picks it, or ``None`` for a direct connection."""
    from clickhouse_connect.driver.httputil import check_env_proxy

    proxy = check_env_proxy("https" if secure else "http", host, port)
    if not proxy:
        return None
    return proxy if proxy.startswith("http") else f"{'https' if secure else 'http'}://{proxy}"


def proxy_login(proxy: str) -> tuple[str, dict[str, str]]:
    """The proxy's URL without its credentials, and the ``Proxy-Authorization`` header they make (urllib3's
    proxy manager sends none for a ``user:password@`` in the URL: every request met the proxy's 407, and the
    run failed as "could not connect")."""
    parts = urlsplit(proxy)
    if parts.username is None:
        return proxy, {}
    from urllib.parse import unquote

    from urllib3.util import make_headers

    login = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=netloc)), make_headers(proxy_basic_auth=login)


def pool_for(
    direct: type[PoolManager],
    proxied: type[ProxyManager],
    *,
    secure: bool,
    host: str,
    port: int,
    verify: bool,
) -> PoolManager:
    """A client's own pool of class ``direct``, or ``proxied`` through the proxy the environment names for
    ``host:port`` (its login sent as ``Proxy-Authorization``), with the driver's pool options."""
    from clickhouse_connect.driver.httputil import get_pool_manager_options

    options = get_pool_manager_options(verify=verify)
    proxy = env_proxy(secure=secure, host=host, port=port)
    if proxy is None:
        return direct(**options)
    url, headers = proxy_login(proxy)
    return proxied(url, proxy_headers=headers, **options)


def readonly_pool(*, secure: bool, host: str, port: int, verify: bool) -> PoolManager:
    """The read-only client's pool: through the environment's proxy for ``host:port``, or direct."""
    return pool_for(
        ReadOnlyPoolManager, ReadOnlyProxyManager, secure=secure, host=host, port=port, verify=verify
    )


def release_pool(manager: PoolManager) -> None:
    """Close a client's own pool's sockets and drop the driver's registry entry (the client does not own
    a pool it was given)."""
    from clickhouse_connect.driver import httputil

    manager.clear()
    httputil.all_managers.pop(manager, None)
