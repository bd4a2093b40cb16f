"""The reader worker's own HTTP client applies the connection's session settings like the sink does, and
``readonly=1`` always wins over them."""

from __future__ import annotations

import time

import pytest

from airflow_provider_dpone.adapters.target_reader.http_client import ReadOnlyHttpClient
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor

pytestmark = pytest.mark.service


def test_session_settings_reach_the_server_and_readonly_stays_on(clickhouse_http: EndpointDescriptor) -> None:
    endpoint = clickhouse_http.model_copy(update={"session_settings": {"max_threads": 3, "readonly": 0}})
    client = ReadOnlyHttpClient(endpoint, time.monotonic() + 30)
    rows = client.query(
        "SELECT name, value FROM system.settings WHERE name IN ('max_threads', 'readonly') ORDER BY name"
    ).result_rows
    assert dict(rows) == {"max_threads": "3", "readonly": "1"}
