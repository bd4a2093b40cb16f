"""Semantic identity: only ``sink.options.durable_quality_replay`` is excluded, by exact path."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.contracts.manifest import Manifest
from airflow_provider_dpone.manifests import (
    IDENTITY_EXCLUDED_PATHS,
    canonical_manifest_json,
    identity_material,
    load_manifest_dict,
    semantic_identity,
)

IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)

# only checks the loader accepts: row_count takes no columns, the others one to three distinct ones
CHECK = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("row_count")}, optional={"severity": st.sampled_from(["error", "warn"])}
    ),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["null_count", "distinct_count", "not_null", "unique"]),
            "columns": st.lists(IDENT, min_size=1, max_size=3, unique=True),
        },
        optional={"severity": st.sampled_from(["error", "warn"])},
    ),
)

MANIFEST = st.fixed_dictionaries(
    {
        "kind": st.just("native_transfer"),
        "name": IDENT,
        "source": st.fixed_dictionaries(
            {
                "type": st.sampled_from(["mssql", "sqlite"]),
                "connection": IDENT,
                "table": IDENT.map(lambda t: f"dbo.{t}"),
            },
            optional={
                "partitioning": st.sampled_from(
                    [
                        {"kind": "none"},
                        {"kind": "day", "column": "order_date"},
                        {"kind": "month", "column": "order_date"},
                        {"kind": "integer_range", "column": "id", "size": 1000},
                    ]
                ),
                "incremental": IDENT.map(lambda c: {"cursor": c}),
                "export": st.sampled_from(["file_artifact", "lazy_plan"]),
                "chunk_rows": st.integers(min_value=1, max_value=5_000_000),
            },
        ),
        "sink": st.fixed_dictionaries(
            {
                "type": st.just("clickhouse"),
                "connection": IDENT,
                "table": IDENT.map(lambda t: f"analytics.{t}"),
                "strategy": st.sampled_from(["incremental_append", "full_refresh", "replace_partition"]),
            },
            optional={
                "load": st.sampled_from(["direct", "staged"]),
                "options": st.fixed_dictionaries({}, optional={"durable_quality_replay": st.booleans()}),
            },
        ),
        "checkpoints": st.fixed_dictionaries({"connection": IDENT}),
    },
    optional={"quality": st.fixed_dictionaries({"checks": st.lists(CHECK, max_size=3)})},
)

#: (description, mutation) pairs: each changes one bound field of a normalized manifest dict.
MUTATIONS = [
    ("sink table", lambda d: d["sink"].__setitem__("table", d["sink"]["table"] + "_x")),
    ("source table", lambda d: d["source"].__setitem__("table", d["source"]["table"] + "_x")),
    (
        "strategy",
        lambda d: d["sink"].__setitem__(
            "strategy", "full_refresh" if d["sink"]["strategy"] != "full_refresh" else "incremental_append"
        ),
    ),
    (
        "chunk_rows",
        lambda d: d["source"].__setitem__("chunk_rows", d["source"]["chunk_rows"] % 5_000_000 + 1),
    ),
    (
        "load path",
        lambda d: d["sink"].__setitem__("load", "staged" if d["sink"]["load"] == "direct" else "direct"),
    ),
    (
        "export path",
        lambda d: d["source"].__setitem__(
            "export", "lazy_plan" if d["source"]["export"] == "file_artifact" else "file_artifact"
        ),
    ),
    ("a quality check", lambda d: d["quality"]["checks"].append({"type": "unique", "columns": ["id"]})),
    (
        "connection name",
        lambda d: d["checkpoints"].__setitem__("connection", d["checkpoints"]["connection"] + "2"),
    ),
    ("manifest name", lambda d: d.__setitem__("name", d["name"] + "2")),
    ("query", lambda d: d["source"].__setitem__("query", "SELECT * FROM t")),
]


def with_selector(data: dict[str, Any], value: bool) -> dict[str, Any]:
    changed = copy.deepcopy(data)
    changed["sink"].setdefault("options", {})["durable_quality_replay"] = value
    return changed


def validated(data: dict[str, Any]) -> Manifest:
    return load_manifest_dict(data, "<test>").manifest


def test_the_exclusion_list_is_exactly_the_selector() -> None:
    assert IDENTITY_EXCLUDED_PATHS == (("sink", "options", "durable_quality_replay"),)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MANIFEST)
def test_toggling_the_selector_never_changes_identity(data: dict[str, Any]) -> None:
    on = load_manifest_dict(with_selector(data, True), "<test>")
    off = load_manifest_dict(with_selector(data, False), "<test>")

    assert on.identity == off.identity
    assert on.normalized != off.normalized  # the normalized form still records the choice
    assert on.normalized["sink"]["options"]["durable_quality_replay"] is True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MANIFEST, st.sampled_from(MUTATIONS), st.booleans())
def test_changing_any_other_field_changes_identity(
    data: dict[str, Any], mutation: Any, selector: bool
) -> None:
    base = load_manifest_dict(with_selector(data, selector), "<test>")
    changed = copy.deepcopy(base.normalized)
    _name, mutate = mutation
    mutate(changed)
    other = load_manifest_dict(changed, "<test>")

    assert other.identity != base.identity


@settings(max_examples=40, deadline=None)
@given(MANIFEST)
def test_identity_ignores_spelling_out_defaults_and_key_order(data: dict[str, Any]) -> None:
    loaded = load_manifest_dict(data, "<test>")
    explicit = json.loads(json.dumps(loaded.normalized))  # every default written out
    reordered = dict(reversed(list(explicit.items())))

    again = load_manifest_dict(reordered, "<test>")
    assert again.identity == loaded.identity
    assert again.normalized == loaded.normalized


def test_identity_is_sha256_of_canonical_json_minus_the_selector() -> None:
    import hashlib

    manifest = validated(
        {
            "kind": "native_transfer",
            "name": "orders",
            "source": {"type": "sqlite", "connection": "src", "table": "orders"},
            "sink": {
                "type": "clickhouse",
                "connection": "ch",
                "table": "demo.orders",
                "strategy": "incremental_append",
                "options": {"durable_quality_replay": True},
            },
            "checkpoints": {"connection": "state"},
        }
    )
    material = identity_material(manifest)
    assert material["sink"]["options"] == {}
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert semantic_identity(manifest) == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    assert json.loads(canonical_manifest_json(manifest))["sink"]["options"] == {
        "durable_quality_replay": True
    }
