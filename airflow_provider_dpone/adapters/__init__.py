"""Adapters: one package per real thing. Vendor SDKs live here only."""
