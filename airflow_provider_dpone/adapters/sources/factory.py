"""The one way the composition root opens a source: manifest source spec + resolved endpoint -> Source."""

from __future__ import annotations

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import SourceSpec, SourceType
from airflow_provider_dpone.ports.source import Source

_EXPECTED_KIND = {SourceType.SQLITE: EndpointKind.SQLITE, SourceType.MSSQL: EndpointKind.MSSQL}


def open_source(spec: SourceSpec, endpoint: EndpointDescriptor) -> Source:
    """A source for ``spec`` reading through ``endpoint``. Nothing is opened until the source is used, so a
    wrong password surfaces as ``source_unreachable`` from ``describe()``, not here."""
    expected = _EXPECTED_KIND[spec.type]
    if endpoint.kind is not expected:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"source type {spec.type.value} needs a {expected.value} connection; "
            f"{endpoint.describe()} is {endpoint.kind.value}",
            details={"connection": endpoint.name, "source_type": spec.type.value},
        )
    if spec.type is SourceType.SQLITE:
        from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource

        if not endpoint.path:
            raise DponeError(
                ErrorCode.CONNECTION_INVALID,
                f"{endpoint.describe()} names no SQLite file",
                details={"connection": endpoint.name},
            )
        return SqliteSource(endpoint.path, spec)
    # Imported here so SQLite-only runs (the demo, the CLI start-up) never load the TDS driver.
    from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource

    return MssqlSource(endpoint, spec)
