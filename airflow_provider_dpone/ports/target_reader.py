"""The bounded, read-only target metrics reader (ADR 0074). Depends only on contracts DTOs."""

from __future__ import annotations

from typing import Protocol

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.target_observation import (
    OBSERVATION_BUDGET_S,
    ReaderOutcome,
    TargetReadRequest,
)


class TargetMetricsReader(Protocol):
    def prove_spawn_capability(self) -> None:
        """Spawn, kill and reap a trivial worker, or raise ``target_reader_unsupported``.

        Called before extraction, so an environment that cannot supervise a worker fails before any
        source or target I/O rather than after publication.
        """

    def observe(
        self, endpoint: EndpointDescriptor, request: TargetReadRequest, budget_s: float = OBSERVATION_BUDGET_S
    ) -> ReaderOutcome:
        """Measure the plan's exact metrics within one monotonic budget; never raises for worker faults.

        Every fault (timeout, malformed or late answer, worker error) is a typed outcome, with
        ``termination_verified`` saying whether the worker is provably gone. The budget bounds local
        observation only: it does not stop remote queries or writes by anyone else. For an embedded chDB
        endpoint the caller must have closed its own clients on that path first.
        """
