"""The supervised, read-only ClickHouse target reader (ADR 0074).

``supervisor`` runs in the caller's process and spawns ``worker`` as a child in its own process group;
they talk through the child's private stdin/stdout pipes only (``protocol``). Importing this package
loads no vendor SDK: only the worker imports clickhouse-connect, and only in the child.
"""

from airflow_provider_dpone.adapters.target_reader.supervisor import WORKER_MODULE, SupervisedTargetReader

__all__ = ["WORKER_MODULE", "SupervisedTargetReader"]
