"""Partition bounds and identity: a bounded slice of a route with a stable ID."""

from __future__ import annotations

import functools
import hashlib
import json
import json.encoder
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
    """Stable partition ID: a digest over route, query hash, schema hash and bounds.

    The digest is of ``canonical_json`` over the four (``reference_partition_id`` spells it out); a run
    computes one per planned partition, tens of thousands on a long route, so the JSON around the bounds
    is built once per route and hashes, and the bounds are written field by field (``_bounds_json``).
    """
    global _last_frame
    last = _last_frame
    if last is not None and last[0] is route and last[1] is query_hash and last[2] is schema_hash:
        head, tail = last[3], last[4]  # the same objects as the call before: a run plans one route
    else:
        head, tail = _id_frame(route, query_hash, schema_hash)
        _last_frame = (route, query_hash, schema_hash, head, tail)
    return "sha256:" + hashlib.sha256((head + _bounds_json(bounds) + tail).encode("utf-8")).hexdigest()


def reference_partition_id(
    route: RouteIdentity, query_hash: str, schema_hash: str, bounds: PartitionBounds
) -> str:
    """What ``partition_id_for`` computes, the slow and obvious way (what its fast form is tested against)."""
    material = canonical_json(
        {
            "route": route.model_dump(mode="json"),
            "query_hash": query_hash,
            "schema_hash": schema_hash,
            "bounds": bounds.model_dump(mode="json"),
        }
    )
    return sha256_tag(material)


#: The frame of the last ``partition_id_for`` call with its route and hashes (held, so never another's by
#: identity): found by three identity tests instead of hashing the route for the cache, 50,000 times a run.
_last_frame: tuple[RouteIdentity, str, str, str, str] | None = None


@functools.lru_cache(maxsize=256)
def _id_frame(route: RouteIdentity, query_hash: str, schema_hash: str) -> tuple[str, str]:
    """The canonical JSON before and after the bounds: ``bounds`` sorts first of the four keys."""
    rest = canonical_json(
        {"route": route.model_dump(mode="json"), "query_hash": query_hash, "schema_hash": schema_hash}
    )
    return '{"bounds":', "," + rest[1:]


#: How ``json.dumps(..., ensure_ascii=False)`` writes a string (the same function it calls).
_json_text = json.encoder.encode_basestring

#: ``PartitionBounds``' fields in sorted order, the order ``canonical_json`` writes them in.
_BOUNDS_KEYS = ("column", "kind", "label", "lower", "upper", "value_type", "values")
if tuple(sorted(PartitionBounds.model_fields)) != _BOUNDS_KEYS:  # a new field would change no ID: refuse
    raise RuntimeError("PartitionBounds changed: _bounds_json must write every field of it")


#: Each kind as JSON text (an enum's ``.value`` is a descriptor call: 50,000 of them a run).
_KIND_JSON = {kind: _json_text(kind.value) for kind in BoundsKind}


def _bounds_json(bounds: PartitionBounds) -> str:
    """``canonical_json(bounds.model_dump(mode="json"))``, written directly (no call per field)."""
    column, lower, upper, values = bounds.column, bounds.lower, bounds.upper, bounds.values
    return (
        f'{{"column":{"null" if column is None else _json_text(column)},"kind":{_KIND_JSON[bounds.kind]},'
        f'"label":{_json_text(bounds.label)},"lower":{"null" if lower is None else _json_text(lower)},'
        f'"upper":{"null" if upper is None else _json_text(upper)},"value_type":{_json_text(bounds.value_type)},'
        f'"values":{"null" if values is None else "[" + ",".join(map(_json_text, values)) + "]"}}}'
    )


class PlannedPartition(BaseModel):
    """A partition the planner intends to move in this run."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    partition_id: str
    bounds: PartitionBounds
    query_hash: str
    schema_hash: str
