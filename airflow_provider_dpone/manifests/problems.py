"""Manifest problems: one record per thing wrong, with a dotted path and a safe message.

Messages name paths, expected types or allowed values, and the TYPE that was found — never the value
written, which could be a secret pasted into the wrong key.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from airflow_provider_dpone.contracts.manifest import Manifest

PathKey = tuple[str | int, ...]


class ProblemKind(str, Enum):
    UNREADABLE = "unreadable"
    YAML_SYNTAX = "yaml_syntax"
    DUPLICATE_KEY = "duplicate_key"
    UNKNOWN_KEY = "unknown_key"
    MISSING_KEY = "missing_key"
    WRONG_TYPE = "wrong_type"
    INVALID_VALUE = "invalid_value"
    FORBIDDEN_SECRET = "forbidden_secret"
    INVALID_CONNECTION = "invalid_connection"


class ManifestProblem(BaseModel):
    """One problem. ``path`` is dotted (``sink.options``, ``quality.checks[0].type``); ``""`` is the root."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    kind: ProblemKind
    path: str
    message: str = Field(min_length=1)
    line: int | None = None
    column: int | None = None
    suggestion: str | None = None
    expected: str | None = None
    found: str | None = None

    def render(self) -> str:
        where = f"`{self.path}`" if self.path else "manifest"
        if self.line is not None and self.column is not None:
            where += f" (line {self.line}, column {self.column})"
        elif self.line is not None:
            where += f" (line {self.line})"
        return f"{where}: {self.message}"


def format_path(path: Sequence[str | int]) -> str:
    """``("quality", "checks", 0, "type")`` -> ``quality.checks[0].type``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            shown = _safe_key(part)
            text += f".{shown}" if text else shown
    return text


def json_type_name(value: object) -> str:
    """The JSON type of a value, as shown to users in place of the value itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


def closest_key(key: str, candidates: Iterable[str]) -> str | None:
    """The valid key the user most likely meant (case-insensitive match first, then difflib)."""
    options = sorted(candidates)
    for option in options:
        if option.lower() == key.lower():
            return option
    matches = difflib.get_close_matches(key, options, n=1, cutoff=0.6)
    if not matches:
        lowered = {option.lower(): option for option in options}
        matches = [lowered[m] for m in difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)]
    return matches[0] if matches else None


# --- pydantic errors -> problems -------------------------------------------------------------------

_EXPECTED_BY_TYPE = {
    "string_type": "string",
    "int_type": "integer",
    "int_from_float": "integer",
    "bool_type": "boolean",
    "float_type": "number",
    "dict_type": "mapping",
    "model_type": "mapping",
    "model_attributes_type": "mapping",
    "list_type": "list",
    "tuple_type": "list",
    "none_required": "null",
}
#: Error types whose pydantic message names only limits, patterns or allowed values (no input).
_SAFE_MESSAGE_TYPES = frozenset(
    {
        "string_too_short",
        "string_too_long",
        "string_pattern_mismatch",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "too_short",
        "too_long",
        "finite_number",
    }
)


def problems_from_validation(
    error: ValidationError,
    positions: Mapping[PathKey, tuple[int, int]],
    *,
    skip_paths: frozenset[PathKey] = frozenset(),
) -> list[ManifestProblem]:
    """Translate pydantic's errors (from strict JSON validation of :class:`Manifest`) into problems."""
    merged: dict[tuple[PathKey, str], list[ErrorDetails]] = {}
    for detail in error.errors(include_url=False):
        path = _field_path(detail["loc"])
        if path in skip_paths:
            continue
        group = "type" if detail["type"] in _EXPECTED_BY_TYPE else f"{detail['type']}:{len(merged)}"
        merged.setdefault((path, group), []).append(detail)
    problems = []
    for (path, _group), details in merged.items():
        problems.append(_problem(path, details, positions))
    return problems


def _problem(
    path: PathKey, details: list[ErrorDetails], positions: Mapping[PathKey, tuple[int, int]]
) -> ManifestProblem:
    first = details[0]
    kind = first["type"]
    shown = format_path(path)
    line = _line_of(path, positions)
    found = json_type_name(first["input"])
    if kind == "extra_forbidden":
        key = path[-1]
        siblings = _model_fields(path[:-1])
        match = closest_key(str(key), siblings) if siblings else None
        suggestion = format_path((*path[:-1], match)) if match else None
        message = "unknown key" + (f"; did you mean `{suggestion}`?" if suggestion else "")
        if not suggestion and siblings:
            message += "; valid keys here: " + ", ".join(sorted(siblings))
        return ManifestProblem(
            kind=ProblemKind.UNKNOWN_KEY, path=shown, message=message, line=line, suggestion=suggestion
        )
    if kind == "missing":
        return ManifestProblem(
            kind=ProblemKind.MISSING_KEY,
            path=shown,
            message="missing required key",
            line=_line_of(path[:-1], positions) if path else None,
        )
    if kind in _EXPECTED_BY_TYPE:
        expected = " or ".join(dict.fromkeys(_EXPECTED_BY_TYPE[d["type"]] for d in details))
        message = f"expected {expected}, found {found}"
        if expected == "boolean" and found == "string":
            message += " (write true or false, unquoted)"
        elif found == "string" and expected in ("integer", "number"):
            message += " (write the number unquoted)"
        return ManifestProblem(
            kind=ProblemKind.WRONG_TYPE,
            path=shown,
            message=message,
            line=line,
            expected=expected,
            found=found,
        )
    if kind in ("enum", "literal_error"):
        expected = str(first.get("ctx", {}).get("expected", "an allowed value"))
        if isinstance(first["input"], str):
            message = f"unsupported value; expected {expected}"
            problem_kind = ProblemKind.INVALID_VALUE
        else:
            message = f"expected {expected}, found {found}"
            problem_kind = ProblemKind.WRONG_TYPE
        return ManifestProblem(
            kind=problem_kind, path=shown, message=message, line=line, expected=expected, found=found
        )
    if kind == "value_error":
        # Raised by our own model validators, whose messages name kinds and keys only.
        message = str(first["msg"]).removeprefix("Value error, ")
        return ManifestProblem(kind=ProblemKind.INVALID_VALUE, path=shown, message=message, line=line)
    if kind in _SAFE_MESSAGE_TYPES:
        message = str(first["msg"]).replace("Input should", "should").replace("String should", "should")
        return ManifestProblem(kind=ProblemKind.INVALID_VALUE, path=shown, message=message, line=line)
    return ManifestProblem(
        kind=ProblemKind.INVALID_VALUE, path=shown, message=f"invalid {found} value", line=line, found=found
    )


def _line_of(path: PathKey, positions: Mapping[PathKey, tuple[int, int]]) -> int | None:
    for end in range(len(path), 0, -1):
        position = positions.get(path[:end])
        if position is not None:
            return position[0]
    return None


def _field_path(loc: tuple[str | int, ...]) -> PathKey:
    """Drop pydantic's union-member tags (``'str'``, ``'int'``) so the path holds keys and indexes only."""
    path: list[str | int] = []
    annotation: Any = Manifest
    for part in loc:
        if isinstance(part, int):
            path.append(part)
            annotation = _item_type(annotation)
            continue
        model = _as_model(annotation)
        if model is None and annotation is not None:
            continue  # a union member tag, not a key
        path.append(part)
        field = model.model_fields.get(part) if model is not None else None
        annotation = field.annotation if field is not None else None
    return tuple(path)


def _model_fields(path: PathKey) -> list[str]:
    annotation: Any = Manifest
    for part in path:
        if isinstance(part, int):
            annotation = _item_type(annotation)
            continue
        model = _as_model(annotation)
        field = model.model_fields.get(part) if model is not None else None
        if field is None:
            return []
        annotation = field.annotation
    model = _as_model(annotation)
    return list(model.model_fields) if model is not None else []


def _non_none_args(annotation: Any) -> tuple[Any, ...]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return tuple(arg for arg in typing.get_args(annotation) if arg is not type(None))
    return (annotation,)


def _as_model(annotation: Any) -> type[BaseModel] | None:
    args = _non_none_args(annotation)
    if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return args[0]
    return None


def _item_type(annotation: Any) -> Any:
    args = _non_none_args(annotation)
    if len(args) != 1:
        return None
    origin = typing.get_origin(args[0])
    if origin in (tuple, list):
        items = typing.get_args(args[0])
        return items[0] if items else None
    return None


def _safe_key(key: str) -> str:
    """A key as problems show it; never one that may hold a secret (``connection:mssql://u:p@h`` is what
    YAML makes of a missing blank after the colon)."""
    if any(mark in key for mark in ":/@=;?&#"):
        return "<a key that is no field name>"
    shown = key if key.isprintable() else repr(key)
    return shown if len(shown) <= 64 else shown[:61] + "..."
