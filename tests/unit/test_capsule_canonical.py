"""Canonical JSON for capsules and frames: one byte form, strictly parsed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.contracts.capsule import (
    CapsuleInvalid,
    canonical_bytes,
    parse_canonical,
    parse_model,
)
from airflow_provider_dpone.contracts.partition import canonical_json
from airflow_provider_dpone.contracts.target_observation import MetricValue, ObservationMetric


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"a":1,"a":2}', "duplicate JSON key"),
        (b'{"a":NaN}', "NaN or Infinity in JSON"),
        (b'{"a":Infinity}', "NaN or Infinity in JSON"),
        (b'{"a":1.5}', "floating-point number in JSON"),
        (b'{"b":1,"a":2}', "JSON is not in canonical form"),
        (b'{"a": 1}', "JSON is not in canonical form"),
        (b'{"a":"\\u00e9"}', "JSON is not in canonical form"),  # canonical keeps non-ASCII as UTF-8
        (b'{"a":1}\n', "JSON is not in canonical form"),
        (b'{"a":', "not valid JSON"),
        (b'{"a":"\xff"}', "not valid JSON"),
    ],
)
def test_non_canonical_or_ambiguous_json_is_rejected(data: bytes, reason: str) -> None:
    with pytest.raises(CapsuleInvalid, match=reason):
        parse_canonical(data, max_bytes=1024)


def test_size_limit_is_checked_before_parsing() -> None:
    data = canonical_json({"a": "x" * 100}).encode()
    assert parse_canonical(data, max_bytes=len(data)) == {"a": "x" * 100}
    with pytest.raises(CapsuleInvalid, match="size limit"):
        parse_canonical(data, max_bytes=len(data) - 1)


def test_model_parse_rejects_unknown_keys_and_wrong_types() -> None:
    good = canonical_bytes(MetricValue(metric=ObservationMetric.ROW_COUNT, value=3))
    assert parse_model(MetricValue, good, max_bytes=1024).value == 3
    with pytest.raises(CapsuleInvalid, match="schema"):
        parse_model(MetricValue, b'{"column":null,"extra":1,"metric":"row_count","value":3}', max_bytes=1024)
    with pytest.raises(CapsuleInvalid, match="schema"):
        parse_model(MetricValue, b'{"column":null,"metric":"row_count","value":"3"}', max_bytes=1024)
    with pytest.raises(CapsuleInvalid, match="schema"):
        parse_model(MetricValue, b'{"column":null,"metric":"row_count","value":-1}', max_bytes=1024)


def test_model_parse_rejects_omitted_defaults_because_bytes_must_round_trip() -> None:
    with pytest.raises(CapsuleInvalid, match="round-trip"):
        parse_model(MetricValue, b'{"metric":"row_count","value":3}', max_bytes=1024)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@given(json_values)
def test_any_canonical_document_parses_back_to_itself(value: object) -> None:
    data = canonical_json(value).encode("utf-8")
    assert parse_canonical(data, max_bytes=len(data)) == value
