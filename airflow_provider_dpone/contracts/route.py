"""Route identity: the unit the target commit guard is scanned over."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field


class Strategy(str, Enum):
    INCREMENTAL_APPEND = "incremental_append"
    FULL_REFRESH = "full_refresh"
    REPLACE_PARTITION = "replace_partition"


class RouteIdentity(BaseModel):
    """(source table, target table, strategy) — independent of query, schema and partition IDs."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    source_table: str = Field(min_length=1)
    target_table: str = Field(min_length=1)
    strategy: Strategy

    def describe(self) -> str:
        return f"{self.source_table} -> {self.target_table} ({self.strategy.value})"

    def key(self) -> str:
        """A stable string used as the indexed route column of the checkpoint table."""
        return f"{self.source_table}|{self.target_table}|{self.strategy.value}"
