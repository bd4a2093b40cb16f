"""The transfer manifest: strict pydantic models (shape in ARCHITECTURE.md section 5).

Loading YAML, friendly error rendering and the semantic identity live in ``airflow_provider_dpone.manifests``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from enum import Enum
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from airflow_provider_dpone.contracts.query_text import opens_with_a_cte, separates_statements, statement_text
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


#: A settle duration: a whole number of minutes, hours or days (``30m``, ``2h``, ``1d``).
_DURATION = re.compile(r"([1-9][0-9]{0,5})([mhd])")
_DURATION_UNITS = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}

#: Partitioning kinds whose bounds are points in time, so "is this partition still open?" has an answer.
TIME_BOUND_KINDS = frozenset({"day", "month"})


def parse_duration(text: str) -> timedelta:
    """``30m`` / ``2h`` / ``1d`` -> timedelta. ``ValueError`` (without the text) for anything else."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(
            "expected a duration: a whole number followed by m, h or d (minutes, hours, days), e.g. 2h or 1d"
        )
    return int(match.group(1)) * _DURATION_UNITS[match.group(2)]


def field_error(loc: tuple[str, ...], message: str, value: object) -> ValidationError:
    """A validation error at an exact manifest path, for rules a parent model checks (message: no input)."""
    error = PydanticCustomError("value_error", "Value error, {reason}", {"reason": message})
    return ValidationError.from_exception_data(
        "Manifest", [InitErrorDetails(type=error, loc=loc, input=value)]
    )


class Partitioning(BaseModel):
    model_config = _STRICT

    kind: PartitionKind
    column: str | None = None
    size: int | None = Field(
        default=None,
        ge=1,
        le=2**62,  # a range start (value - value mod size) stays within 64-bit arithmetic in every source
        description="integer_range: width of each range",
    )
    values: tuple[str | int, ...] | None = Field(default=None, description="list: the partition values")
    settle: str | None = Field(
        default=None,
        description=(
            "day/month: how long after a partition's upper bound its rows may still change (30m, 2h, 1d). "
            "A partition whose upper bound is later than now minus settle is planned but not moved "
            "(skip reason open_partition); it moves on the first run after it settled."
        ),
    )
    lookback: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description=(
            "replace_partition only: the N most recent committed partitions (in bounds order) are moved "
            "again on every run, under the target commit guard, to pick up late-arriving rows."
        ),
    )

    @field_validator("settle")
    @classmethod
    def _settle_is_a_duration(cls, settle: str | None) -> str | None:
        if settle is not None:
            parse_duration(settle)
        return settle

    @model_validator(mode="after")
    def _consistent(self) -> Partitioning:
        if self.kind is not PartitionKind.NONE and not self.column:
            raise ValueError(f"partitioning kind {self.kind.value!r} needs a column")
        if self.kind is PartitionKind.INTEGER_RANGE and self.size is None:
            raise ValueError("integer_range partitioning needs a size")
        if self.kind is PartitionKind.LIST and not self.values:
            raise ValueError("list partitioning needs values")
        if self.settle is not None and self.kind.value not in TIME_BOUND_KINDS:
            raise field_error(
                ("settle",),
                f"settle needs time bounds (kind day or month); kind {self.kind.value!r} has none",
                self.settle,
            )
        return self

    def settle_delta(self) -> timedelta | None:
        """The settle duration, or None when every partition may move at once."""
        return parse_duration(self.settle) if self.settle is not None else None


class Incremental(BaseModel):
    """Bookkeeping only: the cursor never filters rows (partitions and their bounds decide what moves)."""

    model_config = _STRICT

    cursor: str = Field(
        min_length=1,
        description=(
            "a source column whose highest value among the rows a run committed is recorded in the "
            "route's source state after the commit (a high-water mark, for monitoring). It does NOT "
            "select rows: every run reads whole partitions by their bounds. For late rows use "
            "source.partitioning.settle and lookback."
        ),
    )


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
    def _query_has_a_statement(cls, query: str | None, info: ValidationInfo) -> str | None:
        # an empty query would silently read the whole table under another query hash
        nested = info.data.get("type") is SourceType.MSSQL  # SQL Server nests /* */ comments
        if query is not None and not statement_text(query, nested_comments=nested):
            raise ValueError("the query is empty; write a SELECT, or leave `query` out to read the table")
        if query is not None and nested and opens_with_a_cte(query, nested_comments=True):
            raise ValueError(
                "the query starts with WITH: SQL Server allows a CTE only at the start of a statement, and every "
                "read wraps the query as a derived table; write the CTE as a derived table "
                "(SELECT ... FROM (SELECT ...) AS b)"
            )
        if query is not None and separates_statements(query, nested_comments=nested):
            raise ValueError(
                "the query holds more than one statement (a ';' outside quotes and comments before its end); "
                "write one SELECT"
            )
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
    #: ``true``: the target may have a TTL that deletes rows or resets values (a retention table; ADR 0083).
    #: Unset (or ``false``): such a target is refused before arming. Unset keeps a manifest's identity.
    allow_target_ttl: bool | None = None
    #: ``true``: a ``replace_partition`` / ``full_refresh`` target may feed materialized views, whose tables
    #: then receive every replaced partition's rows again on each run (they absorb repeats by design; ADR
    #: 0086). Unset (or ``false``): such a target is refused before arming. Unset keeps a manifest's identity.
    allow_target_views: bool | None = None


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

    @model_validator(mode="after")
    def _lookback_replaces(self) -> Manifest:
        lookback = self.source.partitioning.lookback
        if lookback is not None and self.sink.strategy is not Strategy.REPLACE_PARTITION:
            # only a replace re-run deletes a partition's rows first; an append re-run would duplicate them
            raise field_error(
                ("source", "partitioning", "lookback"),
                f"lookback needs sink.strategy replace_partition (it is {self.sink.strategy.value!r}); "
                "re-moving a committed partition is only safe when the run replaces its rows",
                lookback,
            )
        settle = self.source.partitioning.settle
        if settle is not None and self.sink.strategy is Strategy.FULL_REFRESH:
            raise field_error(
                ("source", "partitioning", "settle"),
                "settle does not apply to sink.strategy full_refresh: a full refresh replaces the whole "
                "table, so a partition left out as open would vanish from the target",
                settle,
            )
        if lookback is not None and self.source.partitioning.kind is PartitionKind.NONE:
            raise field_error(
                ("source", "partitioning", "lookback"),
                "lookback needs partitions (kind day, month, integer_range or list)",
                lookback,
            )
        return self

    def route(self) -> RouteIdentity:
        return RouteIdentity(
            source_table=self.source.table, target_table=self.sink.table, strategy=self.sink.strategy
        )
