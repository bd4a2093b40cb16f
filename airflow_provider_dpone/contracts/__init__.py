"""Pydantic v2 records, enums and error codes. Imports nothing else of the package."""
