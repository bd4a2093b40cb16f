"""A bounded columnar slice of rows, the unit that flows from a source to a sink."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ColumnChunk:
    """Column-oriented rows: ``columns[i]`` holds every value of ``names[i]``.

    A plain frozen dataclass rather than a pydantic model: it is hot-path data, never a stored record.
    """

    partition_id: str
    names: tuple[str, ...]
    columns: tuple[Sequence[object], ...]
    row_count: int
