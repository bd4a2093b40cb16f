"""OpenLineage facets of a route: the source table in, the ClickHouse table out, in the provider's naming.

Why a module of its own: ``apache-airflow-providers-openlineage`` is optional. Nothing here imports it (or
the OpenLineage client) at module import; :func:`operator_lineage` imports it when the provider's listener
asks for facets and returns ``None`` when it is not installed. What a facet may hold: namespaces (scheme,
host and port, or a file path), table names, column names and types, a row count. Never a credential,
SQL text or a value.

Dataset names, as the OpenLineage provider names them (docs/guide/airflow.md, "Lineage"):

* SQL Server: ``mssql://{host}:{port}`` (port 1433 when the connection has none), ``{database}.{schema}.{table}``
  as the mssql provider's ``get_openlineage_database_info`` and the provider's SQL parser build them; the
  table part is the route's canonical spelling (``dbo`` filled in, case-folded), the database the
  connection's (a three-part table name keeps its own).
* SQLite (no provider names it): ``sqlite://{absolute file path}``, ``main.{table}``: the file is the data
  source, as the OpenLineage dbt integration names DuckDB files (``duckdb://{path}``).
* ClickHouse server: ``clickhouse://{host}:{port}`` (8123, or 8443 when secure), ``{database}.{table}``, as
  the OpenLineage dbt integration names ClickHouse.
* chDB (embedded ClickHouse): ``chdb://{absolute data path}``, ``{database}.{table}``: it has no host or
  port; its data directory is what identifies it, like a DuckDB or SQLite file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.manifest import Manifest, SourceType

if TYPE_CHECKING:
    from typing import TypeAlias

    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset
    from openlineage.client.facet_v2 import DatasetFacet, OutputDatasetFacet, RunFacet

    from airflow_provider_dpone.contracts.report import RunReport
    from airflow_provider_dpone.contracts.schema import TableSchema

    #: What the provider's extractor takes from ``get_openlineage_facets_on_*``.
    RouteOperatorLineage: TypeAlias = OperatorLineage[Dataset, RunFacet]

MSSQL_DEFAULT_PORT = 1433
CLICKHOUSE_HTTP_PORT, CLICKHOUSE_HTTPS_PORT = 8123, 8443
#: (connection name or URI, role) -> endpoint, as ``compose.EndpointResolver``.
Resolve = Callable[[str, str], EndpointDescriptor]


@dataclass(frozen=True)
class DatasetRef:
    """One dataset: where (namespace), which table (name), its columns as (name, type) when known."""

    namespace: str
    name: str
    fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RouteLineage:
    """What one try of the route reads and writes; ``rows_written`` only after a completed run."""

    source: DatasetRef
    target: DatasetRef
    rows_written: int | None = None

    def with_run(self, schema: TableSchema | None, report: RunReport | None) -> RouteLineage:
        """Add the columns the run moved (source types in, ClickHouse types out) and the rows it wrote."""
        source, target = self.source, self.target
        if schema is not None:
            source = replace(
                source, fields=tuple((c.name, c.source_type or c.full_type()) for c in schema.columns)
            )
            target = replace(target, fields=tuple((c.name, c.full_type()) for c in schema.columns))
        rows = report.rows_committed if report is not None else self.rows_written
        return RouteLineage(source=source, target=target, rows_written=rows)


#: Completed runs' lineage by task-instance key, for the provider's listener: it may ask another copy of
#: the operator (or a forked process) than the one that ran, so the record is not kept on the operator.
_RECORDED: dict[tuple[str, str, str, int], RouteLineage] = {}


def _key(task_instance: object) -> tuple[str, str, str, int] | None:
    try:
        ti: Any = task_instance
        map_index = ti.map_index if ti.map_index is not None else -1
        return (str(ti.dag_id), str(ti.task_id), str(ti.run_id), int(map_index))
    except (AttributeError, TypeError, ValueError):
        return None


def record(task_instance: object, lineage: RouteLineage) -> None:
    key = _key(task_instance)
    if key is not None:
        _RECORDED[key] = lineage


def recorded(task_instance: object) -> RouteLineage | None:
    key = _key(task_instance)
    return _RECORDED.get(key) if key is not None else None


def route_lineage(manifest: Manifest, source_table: str, resolve: Resolve) -> RouteLineage:
    """Both datasets from the manifest and the resolved endpoints; opens no connection.

    ``source_table`` is the route's canonical source table (``LoadedManifest.route.source_table``)."""
    source = resolve(manifest.source.connection, "source")
    sink = resolve(manifest.sink.connection, "sink")
    return RouteLineage(
        source=source_dataset(manifest.source.type, source_table, source),
        target=target_dataset(manifest.sink.table, sink),
    )


def source_dataset(source_type: SourceType, canonical_table: str, endpoint: EndpointDescriptor) -> DatasetRef:
    if source_type is SourceType.SQLITE:
        return DatasetRef(namespace=f"sqlite://{endpoint.path or ''}", name=canonical_table)
    namespace = _authority_namespace("mssql", endpoint.host, endpoint.port or MSSQL_DEFAULT_PORT)
    three_part = len(_dotted(canonical_table)) == 3
    name = (
        canonical_table if three_part or not endpoint.database else f"{endpoint.database}.{canonical_table}"
    )
    return DatasetRef(namespace=namespace, name=name)


def target_dataset(table: str, endpoint: EndpointDescriptor) -> DatasetRef:
    if endpoint.kind is EndpointKind.CLICKHOUSE and endpoint.interface is ClickHouseInterface.CHDB:
        return DatasetRef(namespace=f"chdb://{endpoint.path or ''}", name=table)
    default_port = CLICKHOUSE_HTTPS_PORT if endpoint.secure else CLICKHOUSE_HTTP_PORT
    return DatasetRef(
        namespace=_authority_namespace("clickhouse", endpoint.host, endpoint.port or default_port), name=table
    )


def _authority_namespace(scheme: str, host: str | None, port: int) -> str:
    """``scheme://host:port``, the host lower-cased as the provider's ``get_openlineage_authority_part``
    reads it; just ``scheme`` without a host (the provider's ``create_namespace``)."""
    return f"{scheme}://{host.strip('[]').lower()}:{port}" if host else scheme


def _dotted(name: str) -> list[str]:
    """Parts of a canonical name (a part holding a dot is double-quoted there)."""
    parts, current, quoted = [], "", False
    for ch in name:
        if ch == '"':
            quoted = not quoted
        if ch == "." and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current]


def lineage_enabled() -> bool:
    """The provider is installed and configured to emit (so reading the columns is worth a query)."""
    try:
        from airflow.providers.openlineage import conf
    except ImportError:
        return False
    try:
        return not conf.is_disabled()
    except Exception:  # a broken OpenLineage configuration must not fail the transfer
        return False


def operator_lineage(lineage: RouteLineage | None) -> RouteOperatorLineage | None:
    """The provider's ``OperatorLineage`` for ``lineage``; ``None`` without the provider or a route."""
    if lineage is None:
        return None
    try:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import InputDataset, OutputDataset
        from openlineage.client.facet_v2 import output_statistics_output_dataset, schema_dataset
    except ImportError:
        return None

    def schema(ref: DatasetRef) -> dict[str, DatasetFacet]:
        if not ref.fields:
            return {}
        fields = [schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in ref.fields]
        return {"schema": schema_dataset.SchemaDatasetFacet(fields=fields)}

    output_facets: dict[str, OutputDatasetFacet] = {}
    if lineage.rows_written is not None:
        output_facets["outputStatistics"] = (
            output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=lineage.rows_written)
        )
    source, target = lineage.source, lineage.target
    return OperatorLineage(
        inputs=[InputDataset(namespace=source.namespace, name=source.name, facets=schema(source))],
        outputs=[
            OutputDataset(
                namespace=target.namespace,
                name=target.name,
                facets=schema(target),
                outputFacets=output_facets,
            )
        ],
    )
