"""Credential-free connections written inline in a manifest: ``sqlite:///file.db`` and ``chdb:///dir``.

The grammar follows SQLAlchemy's file URIs: the path is everything after ``scheme:///``, so
``sqlite:///state.sqlite`` is relative (to the manifest's folder) and ``sqlite:////var/x.db`` absolute.
Anything that could carry a credential (user, password, host, port, query) is refused, so a manifest
never holds a secret. Checking an inline URI is pure string work: no file is opened.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_dpone.contracts.endpoints import EndpointKind

#: Schemes an inline URI may use, and the endpoint kind each one names.
INLINE_SCHEMES: dict[str, EndpointKind] = {"sqlite": EndpointKind.SQLITE, "chdb": EndpointKind.CLICKHOUSE}


class InlineUriError(ValueError):
    """An inline URI that is not admitted. ``reason`` is a fixed phrase that never repeats the URI."""

    def __init__(self, reason: str, *, carries_secret: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.carries_secret = carries_secret


class InlineTarget(BaseModel):
    """What an inline URI names: an endpoint kind and a (possibly relative) file-system path."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    scheme: str
    kind: EndpointKind
    path: str = Field(min_length=1)


def is_inline(value: str) -> bool:
    """The one rule: a connection value containing ``://`` is an inline URI, otherwise a connection name."""
    return "://" in value


def parse_inline(uri: str) -> InlineTarget:
    """Parse an inline URI or raise :class:`InlineUriError` with a safe reason."""
    try:
        parts = urlsplit(uri)
        has_password = parts.password is not None
        has_user = parts.username is not None
    except ValueError:
        raise InlineUriError("inline connection URI is malformed") from None
    if has_password:
        raise InlineUriError(
            "a manifest must not contain a password; move this connection to an AIRFLOW_CONN_<NAME> variable",
            carries_secret=True,
        )
    scheme = uri.partition("://")[0].lower()
    if scheme not in INLINE_SCHEMES:
        raise InlineUriError(
            "inline connections may only be credential-free sqlite:/// or chdb:/// URIs; "
            "put anything else in an AIRFLOW_CONN_<NAME> connection"
        )
    if has_user or parts.netloc:
        raise InlineUriError(f"inline {scheme}:/// URIs take a path only (no user, host or port)")
    if parts.query or parts.fragment or "?" in uri or "#" in uri:
        raise InlineUriError(f"inline {scheme}:/// URIs take a path only (no query or fragment)")
    path = unquote(parts.path[1:]) if parts.path.startswith("/") else ""
    if not path or path.strip() != path or "\x00" in path:
        raise InlineUriError(f"inline {scheme}:/// URI needs a file-system path after {scheme}:///")
    return InlineTarget(scheme=scheme, kind=INLINE_SCHEMES[scheme], path=path)


def inline_problem(uri: str) -> str | None:
    """The safe reason an inline URI is refused, or ``None`` when it is admitted."""
    try:
        parse_inline(uri)
    except InlineUriError as exc:
        return exc.reason
    return None
