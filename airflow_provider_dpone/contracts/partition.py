"""Partition bounds and identity: a bounded slice of a route with a stable ID."""

from __future__ import annotations

import hashlib
import json
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_dpone.contracts.route import RouteIdentity


class BoundsKind(str, Enum):
    """How a partition's rows are selected from the source."""

    ALL = "all"  # the whole table (no partitioning)
    RANGE = "range"  # lower <= column < upper (days, months, integer ranges)
    VALUES = "values"  # column IN (values) (an explicit list)


class PartitionBounds(BaseModel):
    """Source predicate of one partition. Values are canonical strings (ISO dates, decimal integers)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    kind: BoundsKind
    column: str | None = None
    lower: str | None = None
    upper: str | None = None
    values: tuple[str, ...] | None = None
    value_type: str = Field(default="string", pattern=r"^(string|date|datetime|integer)$")
    label: str = Field(min_length=1)


def canonical_json(value: object) -> str:
    """Sorted keys, compact separators, no NaN: the one JSON form hashed or stored by the project."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_tag(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def partition_id_for(route: RouteIdentity, query_hash: str, schema_hash: str, bounds: PartitionBounds) -> str:
    """Stable partition ID: a digest over route, query hash, schema hash and bounds."""
    material = canonical_json(
        {
            "route": route.model_dump(mode="json"),
            "query_hash": query_hash,
            "schema_hash": schema_hash,
            "bounds": bounds.model_dump(mode="json"),
        }
    )
    return sha256_tag(material)


class PlannedPartition(BaseModel):
    """A partition the planner intends to move in this run."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    partition_id: str
    bounds: PartitionBounds
    query_hash: str
    schema_hash: str
