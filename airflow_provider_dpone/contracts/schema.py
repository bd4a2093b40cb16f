"""Table schemas as seen by sources and sinks, in ClickHouse type terms."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_dpone.contracts.partition import canonical_json, sha256_tag


class ColumnSpec(BaseModel):
    """One column. ``clickhouse_type`` is the base type without ``Nullable(...)``."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    clickhouse_type: str = Field(min_length=1)
    nullable: bool = True
    source_type: str | None = None

    def full_type(self) -> str:
        return f"Nullable({self.clickhouse_type})" if self.nullable else self.clickhouse_type


class TableSchema(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    columns: tuple[ColumnSpec, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> ColumnSpec:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(name)

    def schema_hash(self) -> str:
        return sha256_tag(
            canonical_json([c.model_dump(mode="json", exclude={"source_type"}) for c in self.columns])
        )
