"""Table schemas as seen by sources and sinks, in ClickHouse type terms."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
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

    def with_not_null(self, names: Sequence[str]) -> TableSchema:
        """The same columns, ``names`` declared non-nullable: what a target holds once a run proved those
        columns hold no NULL in the partitions it moves. The route's identity stays the source's own schema
        (its hash): this schema only shapes the load."""
        chosen = frozenset(names)
        return TableSchema(
            columns=tuple(
                c.model_copy(update={"nullable": False}) if c.name in chosen else c for c in self.columns
            )
        )

    def schema_hash(self) -> str:
        return sha256_tag(
            canonical_json([c.model_dump(mode="json", exclude={"source_type"}) for c in self.columns])
        )

    def hashes_up_to_nullability(self) -> frozenset[str]:
        """The hashes of this schema with its columns all nullable, all not, or as they are: the same
        names, types and order read another way (a table's NOT NULL columns are nullable through a query)."""
        forms = [self, *(self._all_nullable(flag) for flag in (True, False))]
        return frozenset(form.schema_hash() for form in forms)

    def _all_nullable(self, nullable: bool) -> TableSchema:
        return TableSchema(columns=tuple(c.model_copy(update={"nullable": nullable}) for c in self.columns))


def require_column(schema: TableSchema, field: str, name: str) -> ColumnSpec:
    """The column ``name`` of ``schema``, or ``manifest_invalid`` naming ``field``, the unknown name and the
    closest column the source has (names only: never a value)."""
    try:
        return schema.column(name)
    except KeyError:
        pass
    folded = [c for c in schema.names if c.casefold() == name.casefold()]
    close = folded or difflib.get_close_matches(name, list(schema.names), n=1, cutoff=0.6)
    details: dict[str, object] = {"field": field, "column": name}
    hint = ""
    if close:
        details["suggestion"] = close[0]
        hint = f"; did you mean {close[0]!r}?" + (" (names are case-sensitive here)" if folded else "")
    raise DponeError(
        ErrorCode.MANIFEST_INVALID,
        f"{field} names column {name!r}, which the source does not have{hint}",
        details=details,
    )
