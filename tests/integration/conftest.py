"""Fixtures shared by the integration tests: the route rig's checkpoint store and demo workspace, the
target reader rig's black-hole port, the chDB sink rig's sink, and the hand-made target rig's SQL Server
source."""

from tests.integration.chdb_sink_rig import chdb_sink
from tests.integration.hand_made_target_rig import tds_orders_source
from tests.integration.route_rig import base, store_url
from tests.integration.target_reader_rig import black_hole

__all__ = ["base", "black_hole", "chdb_sink", "store_url", "tds_orders_source"]
