"""Checkpoint batch correlation digest (seed 000): attempt correlation only, never an idempotency key."""

from __future__ import annotations

from collections.abc import Iterable

from airflow_provider_dpone.contracts.partition import canonical_json, sha256_tag


def checkpoint_batch_id(run_id: str, partition_ids: Iterable[str]) -> str:
    """``sha256:`` over the run ID and the sorted active partition IDs."""
    return sha256_tag(canonical_json({"run_id": run_id, "partition_ids": sorted(partition_ids)}))
