"""Load and strictly validate a manifest, reporting every problem at once.

Validation goes through pydantic's strict JSON mode (``Manifest.model_validate_json``): enums may be
written as strings and tuples as lists, but ``"true"`` never becomes a boolean and ``"5"`` never an
integer. Nothing but the manifest file itself is opened: connections are checked as text only.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from airflow_provider_dpone.connections.inline import InlineUriError, is_inline, parse_inline
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import Manifest
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.manifests.identity import normalize, semantic_identity
from airflow_provider_dpone.manifests.problems import (
    ManifestProblem,
    PathKey,
    ProblemKind,
    format_path,
    json_type_name,
    problems_from_validation,
)
from airflow_provider_dpone.manifests.yaml_strict import MAX_NODES, YamlTooComplex, parse_yaml
from airflow_provider_dpone.runtime.quality.policy import policy_problems

#: A manifest is a few kilobytes; refuse anything absurd before parsing it.
MAX_MANIFEST_BYTES = 1_048_576
#: Keys whose value is a connection name or an inline, credential-free URI.
CONNECTION_PATHS: tuple[PathKey, ...] = (
    ("source", "connection"),
    ("sink", "connection"),
    ("checkpoints", "connection"),
)

#: Characters of a URI scheme (RFC 3986: a letter, then letters, digits, ``+``, ``.``, ``-``).
_SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")
#: What ends a URI's userinfo candidate after ``://``.
_USERINFO_END = re.compile(r"[/?#@\s]")
#: a password parameter of a connection string or URL: after ``; ? &`` or a string's opening quote, blanks
#: allowed (``; Pwd=``, ``'Password=``, ``;Password = ``); never a SQL comparison (``u.password = ''``)
_PASSWORD_PARAM = re.compile(r"[?&;'\"]\s*(?:password|passwd|pwd)\s*=", re.IGNORECASE)
#: SQL Server's OPENROWSET/OPENDATASOURCE with its 'server';'user';'password' arguments
_OPENROWSET_CREDENTIALS = re.compile(r"OPEN(?:ROWSET|DATASOURCE)\s*\([^)]*'\s*;\s*'", re.IGNORECASE)
#: where a password written unencoded may end (it may hold ``/ ? #``): a blank, a quote, another URI
_TOKEN_END = re.compile(r"[\s'\"]|://")
#: A connection name: the characters Airflow admits in a connection ID (letters, digits, ``_``, and
#: ``# ! ( ) - . : / \``), at most 250 of them. Anything else in a connection field (JSON, spaces, quotes)
#: is refused before it can be echoed: it is no name, and it may hold a secret.
_CONNECTION_NAME = re.compile(r"[\w#!()\-.:/\\]{1,250}")
#: A JSON connection's secret-bearing key.
_JSON_SECRET_KEY = re.compile(r"[\"'](?:password|passwd|pwd|secret|token)[\"']\s*:", re.IGNORECASE)


class LoadedManifest(BaseModel):
    """A validated manifest, where it came from, its normalized form and its semantic identity."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    manifest: Manifest
    origin: str
    manifest_dir: Path
    normalized: dict[str, Any]
    identity: str

    @property
    def route(self) -> RouteIdentity:
        """The canonical route: the same table spelled differently is the same route."""
        from airflow_provider_dpone.adapters.sources.route_naming import SourceRouteNaming

        return SourceRouteNaming(self.manifest.source).canonical(self.manifest.route())


def load_manifest(path: str | os.PathLike[str]) -> LoadedManifest:
    """Read, parse and validate a YAML manifest file. Raises ``DponeError(MANIFEST_INVALID)``."""
    origin = os.fspath(path)
    text = _read_text(Path(origin), origin)
    manifest_dir = Path(os.path.abspath(origin)).parent
    try:
        parsed = parse_yaml(text)
    except yaml.MarkedYAMLError as exc:
        raise _invalid(origin, [_syntax_problem(exc)]) from exc
    except yaml.YAMLError as exc:
        problem = ManifestProblem(kind=ProblemKind.YAML_SYNTAX, path="", message="invalid YAML")
        raise _invalid(origin, [problem]) from exc
    except YamlTooComplex as exc:
        problem = ManifestProblem(kind=ProblemKind.INVALID_VALUE, path="", message=str(exc))
        raise _invalid(origin, [problem]) from exc
    early = [
        ManifestProblem(
            kind=ProblemKind.DUPLICATE_KEY,
            path=format_path(dup.path),
            message=f"duplicate key (first written at line {dup.first_line})",
            line=dup.line,
        )
        for dup in parsed.duplicates
    ]
    return _validate(parsed.data, origin, manifest_dir, parsed.positions, early)


def load_manifest_dict(
    data: Mapping[str, Any], origin: str = "<manifest>", *, manifest_dir: str | os.PathLike[str] | None = None
) -> LoadedManifest:
    """Validate an already-parsed manifest (e.g. given to the operator as a dict).

    ``manifest_dir`` anchors relative inline paths; it defaults to the current directory.
    """
    base = Path(os.path.abspath(manifest_dir if manifest_dir is not None else os.getcwd()))
    return _validate(data, origin, base, {}, [])


def _read_text(path: Path, origin: str) -> str:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError as exc:
        raise _invalid(origin, [_unreadable("manifest file not found")], headline="cannot read") from exc
    except IsADirectoryError as exc:
        raise _invalid(origin, [_unreadable("manifest path is a directory")], headline="cannot read") from exc
    except OSError as exc:
        raise _invalid(origin, [_unreadable("manifest file cannot be read")], headline="cannot read") from exc
    if len(raw) > MAX_MANIFEST_BYTES:
        raise _invalid(origin, [_unreadable(f"manifest file is larger than {MAX_MANIFEST_BYTES} bytes")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(origin, [_unreadable("manifest file is not UTF-8 text")]) from exc


def _validate(
    data: object,
    origin: str,
    manifest_dir: Path,
    positions: Mapping[PathKey, tuple[int, int]],
    problems: list[ManifestProblem],
) -> LoadedManifest:
    if data is None:
        raise _invalid(origin, [*problems, _root_problem("the manifest is empty; expected a mapping")])
    if not isinstance(data, Mapping):
        found = json_type_name(data)
        raise _invalid(origin, [*problems, _root_problem(f"expected a mapping at the top, found {found}")])
    cleaned, dropped, json_problems = _json_compatible(data, positions)
    problems.extend(json_problems)
    problems.extend(_secret_problems(cleaned, positions))
    problems.extend(_template_problems(cleaned, positions))
    manifest: Manifest | None = None
    try:
        manifest = Manifest.model_validate_json(json.dumps(cleaned, allow_nan=False))
    except ValidationError as exc:
        problems.extend(problems_from_validation(exc, positions, skip_paths=frozenset(dropped)))
    if manifest is not None:
        problems.extend(_quality_problems(manifest, positions))
    if problems or manifest is None:
        raise _invalid(origin, problems)
    return LoadedManifest(
        manifest=manifest,
        origin=origin,
        manifest_dir=manifest_dir,
        normalized=normalize(manifest),
        identity=semantic_identity(manifest),
    )


def _quality_problems(
    manifest: Manifest, positions: Mapping[PathKey, tuple[int, int]]
) -> list[ManifestProblem]:
    """The quality checks as the run binds them: refused here, before any entry point opens a store."""
    return [
        ManifestProblem(
            kind=ProblemKind.INVALID_VALUE,
            path=format_path(path),
            message=message,
            line=positions.get(path, (None, None))[0],
        )
        for path, message in policy_problems(manifest.quality)
    ]


def _json_compatible(
    data: Mapping[Any, Any], positions: Mapping[PathKey, tuple[int, int]]
) -> tuple[dict[str, Any], list[PathKey], list[ManifestProblem]]:
    """A JSON-only copy of ``data``; entries that are not JSON are dropped and reported by path."""
    dropped: list[PathKey] = []
    problems: list[ManifestProblem] = []
    budget = [MAX_NODES]

    def report(path: PathKey, message: str) -> None:
        dropped.append(path)
        line = positions.get(path, (None, None))[0]
        problems.append(
            ManifestProblem(kind=ProblemKind.WRONG_TYPE, path=format_path(path), message=message, line=line)
        )

    def convert(value: Any, path: PathKey, active: frozenset[int]) -> tuple[bool, Any]:
        budget[0] -= 1
        if budget[0] < 0:
            raise YamlTooComplex("the manifest expands to too many values")
        if value is None or isinstance(value, (str, bool, int)):
            return True, value
        if isinstance(value, float):
            if math.isfinite(value):
                return True, value
            report(path, "numbers must be finite")
            return False, None
        if id(value) in active:
            report(path, "recursive aliases are not allowed")
            return False, None
        inner = active | {id(value)}
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    report((*path, str(key)), f"keys must be strings, found {json_type_name(key)}")
                    continue
                ok, converted = convert(item, (*path, key), inner)
                if ok:
                    out[key] = converted
            return True, out
        if isinstance(value, (list, tuple)):
            items = []
            for index, item in enumerate(value):
                ok, converted = convert(item, (*path, index), inner)
                items.append(converted if ok else None)
            return True, items
        report(path, f"expected a JSON value, found {json_type_name(value)}")
        return False, None

    try:
        _, cleaned = convert(data, (), frozenset())
    except (YamlTooComplex, RecursionError):
        problem = ManifestProblem(
            kind=ProblemKind.INVALID_VALUE, path="", message="the manifest expands to too many values"
        )
        return {}, [], [problem]
    return cleaned, dropped, problems


def _secret_problems(
    data: Mapping[str, Any], positions: Mapping[PathKey, tuple[int, int]]
) -> list[ManifestProblem]:
    """A manifest holds no password: inline URIs must be credential-free; no string may embed one."""
    problems: list[ManifestProblem] = []
    connection_paths = set(CONNECTION_PATHS)

    def visit(value: Any, path: PathKey) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                visit(item, (*path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                visit(item, (*path, index))
        elif isinstance(value, str):
            line = positions.get(path, (None, None))[0]
            if path in connection_paths and not is_inline(value) and not _CONNECTION_NAME.fullmatch(value):
                problems.append(_not_a_connection_name(value, format_path(path), line))
            elif path in connection_paths and is_inline(value):
                try:
                    parse_inline(value)
                except InlineUriError as exc:
                    problems.append(
                        ManifestProblem(
                            kind=(
                                ProblemKind.FORBIDDEN_SECRET
                                if exc.carries_secret
                                else ProblemKind.INVALID_CONNECTION
                            ),
                            path=format_path(path),
                            message=exc.reason,
                            line=line,
                        )
                    )
            elif (
                has_uri_password(value)
                or _PASSWORD_PARAM.search(value)
                or _OPENROWSET_CREDENTIALS.search(value)
            ):
                problems.append(
                    ManifestProblem(
                        kind=ProblemKind.FORBIDDEN_SECRET,
                        path=format_path(path),
                        message="a manifest must not contain a password; use an AIRFLOW_CONN_<NAME> connection",
                        line=line,
                    )
                )

    visit(data, ())
    return problems


#: What opens a Jinja expression or statement. dpone renders nothing; a text that still holds one was
#: meant to be rendered (``'{{ ds }}'`` in a file's query matched no row, every daily run "nothing to move").
_TEMPLATE_OPENERS = ("{{", "{%")


#: A shell variable (``${END_DATE}``, ``${TABLE:-orders}``): dpone substitutes none; left in a query it
#: matched no row and every run exited 0 with nothing to move.
_SHELL_VARIABLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?:[:?=+-][^}]*)?\}")


def _template_problems(
    data: Mapping[str, Any], positions: Mapping[PathKey, tuple[int, int]]
) -> list[ManifestProblem]:
    """A manifest holds no unrendered template: Airflow renders a manifest given as a dict, never a file,
    and dpone reads no environment variable into a manifest's text."""
    problems: list[ManifestProblem] = []
    for path, value in _strings(data, ()):
        if any(opener in value for opener in _TEMPLATE_OPENERS):
            message = (
                "holds a Jinja template ('{{' or '{%'), which dpone never renders: Airflow renders a manifest "
                "given to NativeTransferOperator as a dict, not a manifest file; pass the manifest as a dict or "
                "write the file already rendered (a literal brace pair in SQL: join two strings, '{' || '{' in "
                "SQLite, '{' + '{' in SQL Server)"
            )
        elif _SHELL_VARIABLE.search(value):
            message = (
                "holds a shell variable ('${NAME}'), which dpone never substitutes: expand it before the run "
                "(for example with envsubst), or pass the manifest to NativeTransferOperator as a dict with a "
                "Jinja template (a literal '${' in SQL: join two strings, '$' || '{' in SQLite, '$' + '{' in SQL "
                "Server)"
            )
        else:
            continue
        problems.append(
            ManifestProblem(
                kind=ProblemKind.INVALID_VALUE,
                path=format_path(path),
                message=message,
                line=positions.get(path, (None, None))[0],
            )
        )
    return problems


def _strings(value: Any, path: PathKey) -> Iterator[tuple[PathKey, str]]:
    """Every string of a JSON-like value, with its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))
    elif isinstance(value, str):
        yield path, value


def _not_a_connection_name(value: str, path: str, line: int | None) -> ManifestProblem:
    """The problem of a connection field holding neither a name nor an inline URI; never repeats it."""
    if _JSON_SECRET_KEY.search(value):
        kind = ProblemKind.FORBIDDEN_SECRET
        message = (
            "a manifest must not contain a password; move this connection to an AIRFLOW_CONN_<NAME> variable"
        )
    else:
        kind = ProblemKind.INVALID_CONNECTION
        message = (
            "not a connection name, which holds only letters, digits and the characters _ - . : / # ! ( ) and "
            "backslash; an inline connection is a credential-free sqlite:/// or chdb:/// URI, anything else "
            "belongs in an AIRFLOW_CONN_<NAME> variable"
        )
    return ManifestProblem(kind=kind, path=path, message=message, line=line)


def has_uri_password(value: str) -> bool:
    """Whether ``value`` holds ``scheme://user:password@`` anywhere, in time linear in its length.

    The same rule as the pattern ``[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\\s]*:[^/?#@\\s]*@``, whose
    backtracking is quadratic (a 64k-letter name took 12 s): each ``://`` is examined once, the scheme
    run before it and the userinfo after it each end at the neighbouring ``://`` at the latest (a
    ``/`` ends both), so every character is looked at a bounded number of times.
    """
    found = value.find("://")
    while found != -1:
        if _scheme_before(value, found):
            end = _USERINFO_END.search(value, found + 3)
            userinfo = value[found + 3 : end.start()] if end is not None else ""
            if end is not None and ":" in userinfo:
                if value[end.start()] == "@":
                    return True
                # an unencoded / ? # in the password: an @ before the URI's end still makes it userinfo,
                # unless what follows the colon is a port (``host:8443/u/jane@example.com``)
                stop = _TOKEN_END.search(value, end.start())
                after_colon = userinfo.rsplit(":", 1)[1]
                if (
                    not after_colon.isdigit()
                    and "@" in value[end.start() : stop.start() if stop else len(value)]
                ):
                    return True
        found = value.find("://", found + 1)
    return False


def _scheme_before(value: str, end: int) -> bool:
    """Whether a scheme ends at ``end``: a run of scheme characters holding a letter (where it can start)."""
    index = end - 1
    while index >= 0 and value[index] in _SCHEME_CHARS:
        if value[index].isascii() and value[index].isalpha():
            return True
        index -= 1
    return False


def _syntax_problem(exc: yaml.MarkedYAMLError) -> ManifestProblem:
    """Line, column and PyYAML's problem phrase; never the snippet of the offending line."""
    mark = exc.problem_mark or exc.context_mark
    phrase = exc.problem or exc.context or "invalid YAML"
    if exc.context and exc.problem:
        context = exc.context
        started = exc.context_mark
        if started is not None and mark is not None and started.line != mark.line:
            context += f" (started at line {started.line + 1})"
        phrase = f"{context}: {exc.problem}"
    # PyYAML quotes the tag or alias it could not read: an unquoted ``password: !Secret`` is one
    phrase = re.sub(r"'[^']*'", "'...'", phrase)
    return ManifestProblem(
        kind=ProblemKind.YAML_SYNTAX,
        path="",
        message=f"YAML syntax error: {phrase}",
        line=mark.line + 1 if mark is not None else None,
        column=mark.column + 1 if mark is not None else None,
    )


def _unreadable(message: str) -> ManifestProblem:
    return ManifestProblem(kind=ProblemKind.UNREADABLE, path="", message=message)


def _root_problem(message: str) -> ManifestProblem:
    return ManifestProblem(kind=ProblemKind.WRONG_TYPE, path="", message=message)


def _invalid(origin: str, problems: list[ManifestProblem], *, headline: str = "invalid") -> DponeError:
    problems = sorted(problems, key=lambda p: (p.line is None, p.line or 0, p.path))
    count = len(problems)
    noun = "problem" if count == 1 else "problems"
    if headline == "cannot read":
        message = f"cannot read manifest {origin}: {problems[0].message}"
    else:
        message = f"manifest {origin} is invalid ({count} {noun})"
    return DponeError(
        ErrorCode.MANIFEST_INVALID,
        message,
        details={"manifest": origin, "problems": [p.model_dump(mode="json") for p in problems]},
        hint_lines=tuple(p.render() for p in problems),
    )
