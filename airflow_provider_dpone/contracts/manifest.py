"""The transfer manifest: strict pydantic models (shape in ARCHITECTURE.md section 5).

Loading YAML, friendly error rendering and the semantic identity live in ``airflow_provider_dpone.manifests``.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy

_STRICT = ConfigDict(strict=True, frozen=True, extra="forbid")


class SourceType(str, Enum):
    MSSQL = "mssql"
    SQLITE = "sqlite"


class ExportPath(str, Enum):
    FILE_ARTIFACT = "file_artifact"
    LAZY_PLAN = "lazy_plan"


class LoadPath(str, Enum):
    DIRECT = "direct"
    STAGED = "staged"


class PartitionKind(str, Enum):
    NONE = "none"
    DAY = "day"
    MONTH = "month"
    INTEGER_RANGE = "integer_range"
    LIST = "list"


class Partitioning(BaseModel):
    model_config = _STRICT

    kind: PartitionKind
    column: str | None = None
    size: int | None = Field(default=None, ge=1, description="integer_range: width of each range")
    values: tuple[str | int, ...] | None = Field(default=None, description="list: the partition values")

    @model_validator(mode="after")
    def _consistent(self) -> Partitioning:
        if self.kind is not PartitionKind.NONE and not self.column:
            raise ValueError(f"partitioning kind {self.kind.value!r} needs a column")
        if self.kind is PartitionKind.INTEGER_RANGE and self.size is None:
            raise ValueError("integer_range partitioning needs a size")
        if self.kind is PartitionKind.LIST and not self.values:
            raise ValueError("list partitioning needs values")
        return self


class Incremental(BaseModel):
    model_config = _STRICT

    cursor: str = Field(min_length=1)


class SourceSpec(BaseModel):
    model_config = _STRICT

    type: SourceType
    connection: str = Field(min_length=1)
    table: str = Field(min_length=1, description="the route's source table, e.g. dbo.orders")
    query: str | None = Field(
        default=None, description="optional SELECT over the table; changes the query hash"
    )
    columns: tuple[str, ...] | None = Field(default=None, min_length=1)
    partitioning: Partitioning = Partitioning(kind=PartitionKind.NONE)
    incremental: Incremental | None = None
    export: ExportPath = ExportPath.LAZY_PLAN
    chunk_rows: int = Field(default=50_000, ge=1, le=5_000_000)

    @field_validator("query")
    @classmethod
    def _query_has_a_statement(cls, query: str | None) -> str | None:
        # an empty query would silently read the whole table under another query hash
        if query is not None and not query.strip().rstrip(";").strip():
            raise ValueError("the query is empty; write a SELECT, or leave `query` out to read the table")
        return query

    @field_validator("columns")
    @classmethod
    def _columns_listed_once(cls, columns: tuple[str, ...] | None) -> tuple[str, ...] | None:
        # the message gives the position, not the name: validators' messages never quote manifest input
        seen: set[str] = set()
        for index, name in enumerate(columns or ()):
            if name.casefold() in seen:
                raise ValueError(
                    f"entry {index} repeats an earlier column (names are compared ignoring case, "
                    "as the sources compare them)"
                )
            seen.add(name.casefold())
        return columns


class SinkOptions(BaseModel):
    model_config = _STRICT

    durable_quality_replay: bool = False


class SinkSpec(BaseModel):
    model_config = _STRICT

    type: Literal["clickhouse"]
    connection: str = Field(min_length=1)
    table: str = Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
    strategy: Strategy
    load: LoadPath = LoadPath.DIRECT
    order_by: tuple[str, ...] | None = None
    options: SinkOptions = SinkOptions()


class CheckpointsSpec(BaseModel):
    model_config = _STRICT

    connection: str = Field(min_length=1)


class Severity(str, Enum):
    ERROR = "error"
    WARN = "warn"


class QualityCheckType(str, Enum):
    ROW_COUNT = "row_count"
    NULL_COUNT = "null_count"
    DISTINCT_COUNT = "distinct_count"
    NOT_NULL = "not_null"
    UNIQUE = "unique"


class QualityCheck(BaseModel):
    model_config = _STRICT

    type: QualityCheckType
    columns: tuple[str, ...] = ()
    severity: Severity = Severity.ERROR


class QualitySpec(BaseModel):
    model_config = _STRICT

    checks: tuple[QualityCheck, ...] = ()


class Manifest(BaseModel):
    model_config = _STRICT

    kind: Literal["native_transfer"]
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    source: SourceSpec
    sink: SinkSpec
    checkpoints: CheckpointsSpec
    quality: QualitySpec = QualitySpec()

    def route(self) -> RouteIdentity:
        return RouteIdentity(
            source_table=self.source.table, target_table=self.sink.table, strategy=self.sink.strategy
        )
