"""Which committed checkpoints of a target are a route's siblings: the same source table under another
strategy (their rows are this source's), never another source table's (a fan-in) nor the route's own.

An append route treats a sibling's commits like commits of an old definition (``route_identity``); the
black-box proof is ``tests/integration/test_strategy_switch.py``.
"""

from __future__ import annotations

import datetime as dt

from airflow_provider_dpone.adapters.sources.partition_planning import day_partitions
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.route_family import RouteFamily, sibling_committed
from tests.builders import stored_checkpoint

AT = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
(DAY,) = day_partitions("order_date", [dt.date(2026, 11, 30)])


def route(source: str, strategy: Strategy) -> RouteIdentity:
    return RouteIdentity(source_table=source, target_table="demo.orders", strategy=strategy)


class LowerCaseNaming:
    """Canonical names are lower case (what the SQLite naming does to ``MAIN.ORDERS``)."""

    def canonical(self, stored: RouteIdentity) -> RouteIdentity:
        return stored.model_copy(update={"source_table": stored.source_table.lower()})

    def legacy_query_hash(self, source_table: str) -> str:
        return "sha256:" + "c" * 64


def test_only_the_same_sources_commits_under_another_strategy_are_siblings() -> None:
    own = route("main.orders", Strategy.INCREMENTAL_APPEND)
    replaced = stored_checkpoint(route("MAIN.ORDERS", Strategy.REPLACE_PARTITION), DAY, AT)
    refreshed = stored_checkpoint(route("main.orders", Strategy.FULL_REFRESH), DAY, AT)
    armed = stored_checkpoint(
        route("main.orders", Strategy.FULL_REFRESH), DAY, AT, status=CheckpointStatus.EXPORTED
    )
    fan_in = stored_checkpoint(route("main.orders_b", Strategy.REPLACE_PARTITION), DAY, AT)
    mine = stored_checkpoint(own, DAY, AT)
    legacy = stored_checkpoint(route("MAIN.ORDERS", Strategy.INCREMENTAL_APPEND), DAY, AT)
    family = RouteFamily(
        route=own,
        own=(mine, legacy),
        target_wide=(mine, legacy, replaced, refreshed, armed, fan_in),
    )

    assert sibling_committed(family, LowerCaseNaming()) == [replaced, refreshed]
