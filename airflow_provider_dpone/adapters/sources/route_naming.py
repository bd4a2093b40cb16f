"""``RouteNaming`` for a manifest's source: canonical table names and the pre-canonical query hash."""

from __future__ import annotations

from airflow_provider_dpone.adapters.sources.partition_planning import legacy_read_definition_hash
from airflow_provider_dpone.adapters.sources.table_names import canonical_source_table
from airflow_provider_dpone.contracts.manifest import SourceSpec
from airflow_provider_dpone.contracts.route import RouteIdentity


class SourceRouteNaming:
    """Routes of one manifest's source, named canonically (see ``table_names``)."""

    def __init__(self, spec: SourceSpec) -> None:
        self._spec = spec

    def canonical(self, route: RouteIdentity) -> RouteIdentity:
        table = canonical_source_table(self._spec.type, route.source_table)
        return route if table == route.source_table else route.model_copy(update={"source_table": table})

    def legacy_query_hash(self, source_table: str) -> str:
        return legacy_read_definition_hash(self._spec, source_table)
