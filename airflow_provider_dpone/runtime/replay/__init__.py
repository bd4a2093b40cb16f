"""Durable quality replay (ADR 0074): the capsule lifecycle, capsule references, the route's capsule scan,
the operator's resolution and the observation budget."""
