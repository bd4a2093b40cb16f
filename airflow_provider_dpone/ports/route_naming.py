"""How a route is named: the canonical identity a manifest's spelling of a table stands for."""

from __future__ import annotations

from typing import Protocol

from airflow_provider_dpone.contracts.route import RouteIdentity


class RouteNaming(Protocol):
    def canonical(self, route: RouteIdentity) -> RouteIdentity:
        """The route with its source table in the engine's canonical spelling (same table, same key)."""

    def legacy_query_hash(self, source_table: str) -> str:
        """The query hash a release before canonical naming computed for this spelling of the table."""


class RawRouteNaming:
    """Names as written (tests and tools that have no source adapter)."""

    def __init__(self, query_hash: str = "") -> None:
        self._query_hash = query_hash

    def canonical(self, route: RouteIdentity) -> RouteIdentity:
        return route

    def legacy_query_hash(self, source_table: str) -> str:
        return self._query_hash
