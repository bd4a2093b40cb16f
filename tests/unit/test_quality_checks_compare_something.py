"""A count-comparing quality check must have two scopes to compare, or the manifest is refused.

``null_count`` and ``distinct_count`` compare the source's count with the staged or the target generation's.
``load: direct`` without durable replay measures neither: such a check compared nothing and said ``passed``
(seen: two distinct source values, one in the target, ``quality: passed``)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.manifests.loader import load_manifest_dict


def _manifest(check: str, *, load: str | None = None, durable: bool | None = None) -> dict[str, Any]:
    sink: dict[str, Any] = {
        "type": "clickhouse",
        "connection": "ch",
        "table": "analytics.orders",
        "strategy": "incremental_append",
    }
    if load is not None:
        sink["load"] = load
    if durable is not None:
        sink["options"] = {"durable_quality_replay": durable}
    return {
        "kind": "native_transfer",
        "name": "orders",
        "source": {"type": "sqlite", "connection": "src", "table": "orders"},
        "sink": sink,
        "checkpoints": {"connection": "state"},
        "quality": {"checks": [{"type": "row_count"}, {"type": check, "columns": ["customer"]}]},
    }


@pytest.mark.parametrize("check", ["null_count", "distinct_count"])
@pytest.mark.parametrize(("load", "durable"), [(None, None), ("direct", False)])
def test_a_count_comparison_the_direct_load_cannot_make_is_refused_naming_the_check(
    check: str, load: str | None, durable: bool | None
) -> None:
    with pytest.raises(DponeError) as refused:
        load_manifest_dict(_manifest(check, load=load, durable=durable), "<test>")

    assert refused.value.code is ErrorCode.MANIFEST_INVALID
    assert "quality.checks[1].type" in str(refused.value.details)
    assert "durable_quality_replay" in str(refused.value.details)


@pytest.mark.parametrize("check", ["null_count", "distinct_count"])
@pytest.mark.parametrize(("load", "durable"), [("staged", None), ("direct", True), (None, True)])
def test_a_count_comparison_with_a_second_scope_is_accepted(
    check: str, load: str | None, durable: bool
) -> None:
    assert load_manifest_dict(_manifest(check, load=load, durable=durable), "<test>").manifest is not None


@pytest.mark.parametrize("check", ["row_count", "not_null", "unique"])
def test_checks_that_mean_something_on_the_source_alone_stay_accepted_on_the_direct_load(check: str) -> None:
    columns = [] if check == "row_count" else ["customer"]
    data = _manifest("row_count")
    data["quality"]["checks"] = [{"type": check, "columns": columns}] if columns else [{"type": check}]
    assert load_manifest_dict(data, "<test>").manifest is not None
