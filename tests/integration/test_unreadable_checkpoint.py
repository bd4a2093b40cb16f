"""An unreadable stored checkpoint blocks as an invalid guard, is listed as INVALID, and can be resolved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.checkpoint_sql.tables import CHECKPOINT_TABLE
from tests.integration.route_rig import (
    dpone,
    source_rows,
    target_rows,
    write_manifest,
)


def corrupt_latest_row(url: str, how: str) -> str:
    """Hand-edit the newest checkpoint row; returns its partition ID."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            row = conn.execute(
                sa.text(
                    f"SELECT id, partition_id, payload_text FROM {CHECKPOINT_TABLE} ORDER BY id DESC LIMIT 1"
                )
            ).one()
            payload = json.loads(row.payload_text)
            if how == "bad_json":
                # PostgreSQL's generated JSONB column refuses text that is not JSON at all
                text = "[1, 2]" if url.startswith("postgresql") else "{not json"
            elif how == "unknown_status":
                text = json.dumps({**payload, "status": "WEIRD"})
            else:  # the payload names another partition than its row
                text = json.dumps({**payload, "partition_id": "sha256:" + "0" * 64})
            conn.execute(
                sa.text(f"UPDATE {CHECKPOINT_TABLE} SET payload_text = :t WHERE id = :i"),
                {"t": text, "i": row.id},
            )
        return str(row.partition_id)
    finally:
        engine.dispose()


@pytest.mark.parametrize("how", ["bad_json", "unknown_status", "partition_mismatch"])
def test_an_unreadable_row_blocks_is_listed_invalid_and_resolving_it_resumes_without_duplicates(
    base: Path,
    store_url: str,
    how: str,
) -> None:
    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    partition = corrupt_latest_row(store_url, how)

    blocked = dpone("run", str(manifest))
    assert blocked.exit_code == 3, blocked.output
    assert "native_transfer_target_commit_guard_invalid" in blocked.output
    assert partition[:19] in blocked.output  # the partition is named
    assert "WEIRD" not in blocked.output and "not json" not in blocked.output

    listing = json.loads(dpone("checkpoints", "--json", str(manifest)).stdout)
    (invalid,) = [p for p in listing["partitions"] if p["guard_phase"] == "INVALID"]
    assert (
        invalid["partition_id"] == partition
        and invalid["guard_invalid_reason"] == "stored checkpoint is unreadable"
    )
    inspect = dpone("guard", "inspect", "--json", str(manifest))
    assert inspect.exit_code == 0 and partition in inspect.output

    resolved = dpone(
        "guard",
        "resolve",
        str(manifest),
        "--partition",
        partition,
        "--as",
        "committed",
        "--reason",
        "checked",
    )
    assert resolved.exit_code == 0, resolved.output
    assert "attempt_rows=-\n" in resolved.output
    assert "None" not in resolved.output  # a count nobody recorded is shown as guard inspect shows it

    again = dpone("run", "--json", str(manifest))
    assert again.exit_code == 0, again.output
    assert '"partitions_committed": 0' in again.output
    assert target_rows(base) == source_rows(base)
