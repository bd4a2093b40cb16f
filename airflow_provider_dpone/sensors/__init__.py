"""Sensors: wait on a route's guard instead of burning a transfer task's retries."""
