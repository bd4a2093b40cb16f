"""Normalized manifest and its semantic identity.

The normalized form is the validated manifest dumped to JSON with every default filled in, serialized
canonically (sorted keys, compact). The semantic identity is ``sha256:`` over that canonical JSON with a
fixed list of EXACT paths removed after validation. Only composition metadata may be excluded: today
just ``sink.options.durable_quality_replay`` (ADR 0074: opting in to durable replay does not change what
is moved). Every other field, including every other option, stays bound.

Keys added after identities were first recorded are left out of the normalized form while unset
(:data:`OMITTED_WHEN_UNSET`), so an existing manifest keeps its identity across the upgrade; once set they
are bound like any other field. ``source.partitioning.settle`` and ``lookback`` change which partitions a
run moves, not what a partition is: partition IDs never include them (they hash route, read definition,
schema and bounds only).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dpone.contracts.manifest import Manifest
from airflow_provider_dpone.contracts.partition import canonical_json, sha256_tag

#: Exact paths removed from the normalized manifest before hashing. Not prefixes, not patterns.
IDENTITY_EXCLUDED_PATHS: tuple[tuple[str, ...], ...] = (("sink", "options", "durable_quality_replay"),)


#: Exact paths dropped from the normalized form when their value is null (keys newer than identities).
OMITTED_WHEN_UNSET: tuple[tuple[str, ...], ...] = (
    ("source", "partitioning", "settle"),
    ("source", "partitioning", "lookback"),
    ("sink", "options", "allow_target_ttl"),
    ("sink", "options", "allow_target_views"),
)


def normalize(manifest: Manifest) -> dict[str, Any]:
    """The canonical JSON-compatible dict of a validated manifest, defaults filled in."""
    material: dict[str, Any] = manifest.model_dump(mode="json")
    for path in OMITTED_WHEN_UNSET:
        if _leaf(material, path) is None:
            material = _without(material, path)
    return material


def _leaf(data: dict[str, Any], path: tuple[str, ...]) -> object:
    node: object = data
    for key in path:
        if not isinstance(node, dict):
            raise TypeError(f"normalization path {'.'.join(path)} does not lead to a mapping")
        node = node[key]
    return node


def canonical_manifest_json(manifest: Manifest) -> str:
    """Sorted-key, compact JSON text of the normalized manifest."""
    return canonical_json(normalize(manifest))


def identity_material(manifest: Manifest) -> dict[str, Any]:
    """The normalized manifest minus the excluded exact paths: what the identity hashes."""
    material = normalize(manifest)
    for path in IDENTITY_EXCLUDED_PATHS:
        material = _without(material, path)
    return material


def semantic_identity(manifest: Manifest) -> str:
    """``sha256:<hex>`` over the canonical JSON of :func:`identity_material`."""
    return sha256_tag(canonical_json(identity_material(manifest)))


def _without(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """A copy of ``data`` with the leaf at ``path`` removed; the path must exist (it is a validated field)."""
    head, *rest = path
    copy = dict(data)
    if not rest:
        del copy[head]
        return copy
    child = copy[head]
    if not isinstance(child, dict):
        raise TypeError(f"identity exclusion path {'.'.join(path)} does not lead to a mapping")
    copy[head] = _without(child, tuple(rest))
    return copy
