"""A write whose answer is lost after the server applied it is never sent again (ClickHouse 18.16, HTTP).

clickhouse-connect sends a request again when its connection closes or resets before the answer arrives.
Seen before the fix, behind a proxy that let the server apply a request and then dropped the connection: a
direct load's ``INSERT``, a staged load's publish (``ATTACH ... FROM`` its staging table) and a publish's
``INSERT ... SELECT`` were each applied twice, every row of the run held twice in the target, exit 0. Now
the target call fails, the partitions stay armed (``target_outcome_unknown``), the target holds each row
at most once, and the runbook's answer brings it to exactly the source's rows.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.integration.route_rig import TARGET_COLUMNS, dpone, manifest_at, printed, source_rows
from tests.integration.server_rig import server_database
from tests.loopback_proxy import LoopbackProxy

pytestmark = pytest.mark.service


class LosesAnswer(LoopbackProxy):
    """Forwards everything, but once: the server's answer to the first request naming ``keyword`` is
    dropped and that connection closed, after the server applied the request."""

    def __init__(self, host: str, upstream_port: int, keyword: bytes) -> None:
        super().__init__(host, upstream_port)
        self.keyword = keyword
        self.lost: list[bytes] = []
        self._armed: set[int] = set()
        self._heads: dict[int, bytes] = {}  # the start of each connection's current request

    def client_chunk(self, chunk: bytes, client: socket.socket, upstream: socket.socket) -> bytes | None:
        if chunk.startswith(b"POST"):  # a request's line and headers; its body may follow in another chunk
            self._heads[id(client)] = b""
        head = self._heads.get(id(client))
        if head is not None and len(head) < 16384:
            head = self._heads[id(client)] = head + chunk[:16384]
            if not self.lost and self.keyword in head:
                self.lost.append(head.split(b"\r\n", 1)[0][:40])
                self._armed.add(id(client))
        return chunk

    def server_chunk(self, chunk: bytes, client: socket.socket, upstream: socket.socket) -> bytes | None:
        return None if id(client) in self._armed else chunk


@pytest.fixture
def server(
    clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[object, str]]:
    with server_database(clickhouse_http, monkeypatch, "direct", "dpone_lost_") as (client, database):
        client.command(f"CREATE DATABASE {database}")
        yield client, database


def _manifest(base: Path, connection: str, table: str, load: str) -> Path:
    path = manifest_at(base, target=table, file=f"{connection}.yaml")
    text = path.read_text(encoding="utf-8").replace(
        "connection: chdb:///clickhouse", f"connection: {connection}"
    )
    path.write_text(text.replace("  order_by:", f"  load: {load}\n  order_by:"), encoding="utf-8")
    return path


def _held(client: object, table: str) -> tuple[int, int]:
    count, distinct = client.query(f"SELECT count(), uniqExact(id) FROM {table}").result_rows[0]  # type: ignore[attr-defined]
    return int(count), int(distinct)


@pytest.mark.parametrize(
    ("load", "keyword"),
    [("direct", b"INSERT"), ("staged", b"ATTACH")],
    ids=["direct-insert", "staged-publish"],
)
def test_a_write_whose_answer_was_lost_blocks_the_route_and_is_never_applied_twice(
    base: Path,
    store_url: str,
    server: tuple[object, str],
    clickhouse_http: EndpointDescriptor,
    monkeypatch: pytest.MonkeyPatch,
    load: str,
    keyword: bytes,
) -> None:
    client, database = server
    table = f"{database}.orders"
    proxy = LosesAnswer(clickhouse_http.host or "127.0.0.1", int(clickhouse_http.port or 0), keyword)
    monkeypatch.setenv("AIRFLOW_CONN_LOSSY", f"clickhouse://default@127.0.0.1:{proxy.port}/default")
    manifest = _manifest(base, "lossy", table, load)  # the same proxy throughout: it loses one answer
    try:
        lossy = dpone("run", "--json", str(manifest))

        assert proxy.lost, "the fault never fired"
        assert lossy.exit_code != 0, lossy.output  # red before: exit 0 with every row twice
        count, distinct = _held(client, table) if _exists(client, table) else (0, 0)
        assert count == distinct  # no row twice
        blocked = json.loads(dpone("guard", "inspect", str(manifest), "--json").stdout)["blocked"]
        assert blocked and {row["phase"] for row in blocked} == {"target_outcome_unknown"}
        for row in blocked:  # the runbook: the attempt's rows are all there, none, or part (deleted first)
            held = row["target_rows"]
            answer = "committed" if held and held == row["source_rows"] else "not-applied"
            if answer == "not-applied" and held:
                day = row["label"].split("=", 1)[1]
                _delete_day(client, table, day)
            resolved = dpone(
                "guard",
                "resolve",
                str(manifest),
                "--partition",
                row["partition_id"],
                "--as",
                answer,
                "--reason",
                "r",
            )
            assert resolved.exit_code == 0, resolved.output
        assert dpone("run", str(manifest)).exit_code == 0
    finally:
        proxy.close()
    assert printed(client.query(f"SELECT {TARGET_COLUMNS} FROM {table}").result_rows) == source_rows(base)  # type: ignore[attr-defined]


def _delete_day(client: object, table: str, day: str) -> None:
    """The operator's delete of a partly landed day (18.16 runs it as a mutation: waited for here)."""
    client.command(f"ALTER TABLE {table} DELETE WHERE order_date = '{day}'")  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while client.query(f"SELECT count() FROM {table} WHERE order_date = '{day}'").result_rows[0][0]:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the delete did not finish"
        time.sleep(0.2)


def _exists(client: object, table: str) -> bool:
    """Whether ``table`` exists (a staged load whose publish was lost may have created it)."""
    database, name = table.split(".")
    found = client.query(  # type: ignore[attr-defined]
        f"SELECT count() FROM system.tables WHERE database = '{database}' AND name = '{name}'"
    ).result_rows[0][0]
    return bool(found)
