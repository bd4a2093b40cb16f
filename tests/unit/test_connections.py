"""Connection values -> endpoint descriptors: AIRFLOW_CONN_* (URI and JSON forms) and inline URIs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from airflow_provider_dpone.connections import (
    ConnectionRole,
    env_var_name,
    inline_problem,
    is_inline,
    parse_connection_value,
    resolve_endpoint,
    setting_line,
)
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

NASTY = "p@ss:w/rd?#%&=+ é'\"\\"


def resolve(value: str, role: str, env: dict[str, str], base: Path = Path("/manifests")):  # type: ignore[no-untyped-def]
    return resolve_endpoint(value, role=role, manifest_dir=base, env=env)


def test_env_var_name_is_the_upper_cased_connection_id() -> None:
    assert env_var_name("orders_mssql") == "AIRFLOW_CONN_ORDERS_MSSQL"
    assert is_inline("sqlite:///x.db") and not is_inline("orders_mssql")


def test_mssql_uri_form() -> None:
    env = {"AIRFLOW_CONN_ORDERS_MSSQL": "mssql://etl:secret@sql.example:1433/sales"}
    endpoint = resolve("orders_mssql", "source", env)

    assert endpoint.kind is EndpointKind.MSSQL
    assert (endpoint.host, endpoint.port, endpoint.database, endpoint.user) == (
        "sql.example",
        1433,
        "sales",
        "etl",
    )
    assert endpoint.secret() == "secret"
    assert endpoint.name == "orders_mssql"


def test_password_with_special_characters_round_trips_and_never_shows() -> None:
    uri = f"clickhouse://{quote('an@lyst', safe='')}:{quote(NASTY, safe='')}@ch.local:8443/analytics?secure=true"
    endpoint = resolve("ch", "sink", {"AIRFLOW_CONN_CH": uri})

    assert endpoint.secret() == NASTY
    assert endpoint.user == "an@lyst"
    assert endpoint.secure is True
    assert endpoint.interface is ClickHouseInterface.HTTP
    for shown in (repr(endpoint), str(endpoint), endpoint.describe(), endpoint.model_dump_json()):
        assert NASTY not in shown and quote(NASTY, safe="") not in shown
    assert NASTY not in repr(parse_connection_value(uri))


def test_clickhouse_uri_with_secure_false_and_database() -> None:
    env = {"AIRFLOW_CONN_ANALYTICS": "clickhouse://default:pw@127.0.0.1:8123/analytics?secure=false"}
    endpoint = resolve("analytics", "sink", env)

    assert (endpoint.host, endpoint.port, endpoint.database, endpoint.secure) == (
        "127.0.0.1",
        8123,
        "analytics",
        False,
    )


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_postgres_uri_forms(scheme: str) -> None:
    env = {"AIRFLOW_CONN_STATE": f"{scheme}://dpone:pw@pg.local:5432/dpone_state"}
    endpoint = resolve("state", "checkpoints", env)

    assert endpoint.kind is EndpointKind.POSTGRES
    assert (endpoint.host, endpoint.port, endpoint.database) == ("pg.local", 5432, "dpone_state")


def test_sqlite_uri_absolute_and_relative_paths(tmp_path: Path) -> None:
    absolute = resolve(
        "state", "checkpoints", {"AIRFLOW_CONN_STATE": "sqlite:////var/lib/dpone/state.db"}, tmp_path
    )
    relative = resolve("state", "checkpoints", {"AIRFLOW_CONN_STATE": "sqlite:///state.db"}, tmp_path)

    assert absolute.kind is EndpointKind.SQLITE and absolute.path == "/var/lib/dpone/state.db"
    assert relative.path == str(tmp_path / "state.db")


@pytest.mark.parametrize(
    "value",
    ["clickhouse://?interface=chdb&path=/data/chdb", "chdb:////data/chdb", "chdb://?path=/data/chdb"],
)
def test_chdb_targets_in_uri_form(value: str) -> None:
    endpoint = resolve("target", "sink", {"AIRFLOW_CONN_TARGET": value})

    assert endpoint.kind is EndpointKind.CLICKHOUSE
    assert endpoint.interface is ClickHouseInterface.CHDB
    assert endpoint.path == "/data/chdb"
    assert endpoint.password is None


def test_json_form_with_extra_object_and_string_port() -> None:
    value = json.dumps(
        {
            "conn_type": "clickhouse",
            "host": "ch.local",
            "login": "analyst",
            "password": NASTY,
            "port": "8123",
            "schema": "analytics",
            "extra": {"secure": "false"},
        }
    )
    endpoint = resolve("ch", "sink", {"AIRFLOW_CONN_CH": value})

    assert (endpoint.host, endpoint.port, endpoint.database, endpoint.user) == (
        "ch.local",
        8123,
        "analytics",
        "analyst",
    )
    assert endpoint.secret() == NASTY
    assert NASTY not in repr(endpoint)


def test_json_form_chdb_with_relative_path(tmp_path: Path) -> None:
    value = json.dumps({"conn_type": "clickhouse", "extra": json.dumps({"interface": "chdb", "path": "ch"})})
    endpoint = resolve("target", "sink", {"AIRFLOW_CONN_TARGET": value}, tmp_path)

    assert endpoint.interface is ClickHouseInterface.CHDB
    assert endpoint.path == str(tmp_path / "ch")


def test_inline_uris_resolve_against_the_manifest_folder(tmp_path: Path) -> None:
    state = resolve("sqlite:///state.sqlite", "checkpoints", {}, tmp_path)
    target = resolve("chdb:///clickhouse", "sink", {}, tmp_path)
    absolute = resolve("sqlite:////srv/source.sqlite", "source", {}, tmp_path)

    assert (state.kind, state.path) == (EndpointKind.SQLITE, str(tmp_path / "state.sqlite"))
    assert (target.kind, target.interface, target.path) == (
        EndpointKind.CLICKHOUSE,
        ClickHouseInterface.CHDB,
        str(tmp_path / "clickhouse"),
    )
    assert absolute.path == "/srv/source.sqlite"
    assert not (tmp_path / "state.sqlite").exists()  # resolving opens and creates nothing


def test_inline_uri_with_a_password_is_refused_without_echo(tmp_path: Path) -> None:
    assert inline_problem("sqlite:///ok.db") is None
    with pytest.raises(DponeError) as info:
        resolve("mssql://u:hunter2@h/db", "source", {}, tmp_path)

    assert info.value.code is ErrorCode.CONNECTION_INVALID
    assert "hunter2" not in info.value.render() + repr(info.value.details)


def test_missing_variable_names_the_variable_to_set() -> None:
    with pytest.raises(DponeError) as info:
        resolve("orders_mssql", ConnectionRole.SOURCE, {})

    assert info.value.code is ErrorCode.CONNECTION_MISSING
    assert "set AIRFLOW_CONN_ORDERS_MSSQL" in info.value.safe_message
    assert info.value.details["variable"] == "AIRFLOW_CONN_ORDERS_MSSQL"


@pytest.mark.parametrize("connection_id", ["orders_state", "sqlite-src", "orders.ch"])
def test_the_printed_setting_line_gives_the_variable_to_dpone_in_bash(connection_id: str) -> None:
    """Airflow admits ``-`` and ``.`` in a connection ID; bash refuses ``export`` of such a name, so the
    hint (and the task log's) must be a line bash runs, handing the value to the command that follows."""
    variable = env_var_name(connection_id)
    line = setting_line(variable, "'sqlite:////tmp/a b.db'")
    show = f"python3 -c 'import os; print(os.environ[\"{variable}\"])'"
    script = line.split(" dpone ...")[0] + " " + show if " dpone ..." in line else f"{line}\n{show}"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "sqlite:////tmp/a b.db\n"


def test_a_missing_connection_with_a_dash_hints_a_line_bash_accepts() -> None:
    with pytest.raises(DponeError) as info:
        resolve("sqlite-src", ConnectionRole.SOURCE, {})

    (hint,) = info.value.hint_lines
    assert "export AIRFLOW_CONN_SQLITE-SRC" not in hint
    assert hint.startswith("e.g. env AIRFLOW_CONN_SQLITE-SRC='")


@pytest.mark.parametrize(
    "value",
    [
        "mssql://etl:hunter2@db:notaport/sales",
        "mssql://etl:hunter2@db:99999/sales",
        "{not json hunter2",
        '{"conn_type": "mssql", "password": "hunter2", "host": "h", "bogus_field": 1}',
        '{"conn_type": "mssql", "password": "hunter2", "host": "h", "port": "x"}',
        "oracle://u:hunter2@h:1521/db",
        "mssql://u:hunter2@/db",
        "clickhouse://u:hunter2@h?interface=grpc",
        "hunter2",
        "mssql://u:hunter2@h/db://x",
        # an unencoded '?', '#' or '/' in the password ended the login early: the rest became extras whose
        # names the error printed (red before: 'hunter2' shown as an unknown extra)
        "clickhouse://etl:?hunter2=rest@127.0.0.1:9/analytics",
        "clickhouse://etl:ab#hunter2=rest@127.0.0.1:9/analytics",
        "clickhouse://etl:ab/hunter2=rest@127.0.0.1:9/analytics",
        # an '@' in the password before the '?': the login parsed, the rest of the password became extras
        "clickhouse://default:Sec@ret?hunter2=1@127.0.0.1:9/db",
        "clickhouse://default:123?hunter2=1@127.0.0.1:9/db",
        # a password of digits then '/' or '#': parsed as host:port and the rest as the database (sent there)
        "clickhouse://default:2024/hunter2@127.0.0.1:8123/db",
        "mssql://sa:1234#hunter2@127.0.0.1:1433/db",
        # close to a known extra: the known key is suggested, the fragment never shown
        "clickhouse://etl:p@ss?hunter2secure=1@127.0.0.1:9/db",
    ],
)
def test_malformed_connections_are_invalid_and_never_echoed(value: str) -> None:
    with pytest.raises(DponeError) as info:
        resolve("orders", "source", {"AIRFLOW_CONN_ORDERS": value})

    err = info.value
    assert err.code is ErrorCode.CONNECTION_INVALID
    shown = err.render() + repr(err.details) + str(err)
    assert "hunter2" not in shown
    cause = err.__cause__
    while cause is not None:  # the chained cause carries a safe reason only
        assert "hunter2" not in str(cause)
        cause = cause.__cause__


@pytest.mark.parametrize(
    ("role", "value"),
    [
        ("sink", "mssql://u:p@h/db"),
        ("checkpoints", "clickhouse://u:p@h/db"),
        ("source", "postgres://u:p@h/db"),
    ],
)
def test_a_connection_of_the_wrong_kind_for_its_role_is_invalid(role: str, value: str) -> None:
    with pytest.raises(DponeError) as info:
        resolve("c", role, {"AIRFLOW_CONN_C": value})
    assert info.value.code is ErrorCode.CONNECTION_INVALID
    assert f"as the {role} connection" in info.value.safe_message


def test_resolution_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_STATE_ENV", "sqlite:///s.db")
    endpoint = resolve_endpoint("state_env", role="checkpoints", manifest_dir=tmp_path)
    assert endpoint.path == str(tmp_path / "s.db")


# -- the provider's own connection types, read by the CLI -------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "dpone-mssql://etl:secret@sql.example:1433/sales",
        json.dumps(
            {
                "conn_type": "dpone_mssql",
                "host": "sql.example",
                "port": 1433,
                "schema": "sales",
                "login": "etl",
                "password": "secret",
            }
        ),
    ],
)
def test_dpone_mssql_connection_is_read_as_mssql(value: str) -> None:
    endpoint = resolve("orders_mssql", "source", {"AIRFLOW_CONN_ORDERS_MSSQL": value})
    standard = resolve(
        "orders_mssql", "source", {"AIRFLOW_CONN_ORDERS_MSSQL": "mssql://etl:secret@sql.example:1433/sales"}
    )

    assert endpoint.kind is EndpointKind.MSSQL
    assert endpoint == standard
    assert endpoint.secret() == "secret"


def test_dpone_clickhouse_connection_is_read_as_clickhouse_over_http() -> None:
    env = {"AIRFLOW_CONN_CH": "dpone-clickhouse://loader:pw@ch.example:8443/analytics?secure=true"}
    endpoint = resolve("ch", "sink", env)

    assert (endpoint.kind, endpoint.interface) == (EndpointKind.CLICKHOUSE, ClickHouseInterface.HTTP)
    assert (endpoint.host, endpoint.port, endpoint.database, endpoint.user, endpoint.secure) == (
        "ch.example",
        8443,
        "analytics",
        "loader",
        True,
    )


def test_dpone_clickhouse_connection_with_chdb_interface_is_an_embedded_target(tmp_path: Path) -> None:
    value = json.dumps({"conn_type": "dpone_clickhouse", "extra": {"interface": "chdb", "path": "ch"}})
    endpoint = resolve("target", "sink", {"AIRFLOW_CONN_TARGET": value}, tmp_path)

    assert endpoint.interface is ClickHouseInterface.CHDB
    assert endpoint.path == str(tmp_path / "ch")


@pytest.mark.parametrize(
    "extra",
    [
        {"backend": "sqlite", "path": "state.sqlite"},
        {"path": "state.sqlite"},
        {"backend": "SQLite", "path": "state.sqlite"},
    ],
)
def test_dpone_checkpoints_connection_with_sqlite_backend(extra: dict[str, str], tmp_path: Path) -> None:
    value = json.dumps({"conn_type": "dpone_checkpoints", "extra": extra})
    endpoint = resolve("state", "checkpoints", {"AIRFLOW_CONN_STATE": value}, tmp_path)

    assert (endpoint.kind, endpoint.path) == (EndpointKind.SQLITE, str(tmp_path / "state.sqlite"))


@pytest.mark.parametrize(
    "value",
    [
        "dpone-checkpoints://dpone:pw@pg.local:5432/dpone_state?backend=postgres",
        "dpone-checkpoints://dpone:pw@pg.local:5432/dpone_state?backend=postgresql",
        "dpone-checkpoints://dpone:pw@pg.local:5432/dpone_state",  # no backend and no path: PostgreSQL
    ],
)
def test_dpone_checkpoints_connection_with_postgres_backend(value: str) -> None:
    endpoint = resolve("state", "checkpoints", {"AIRFLOW_CONN_STATE": value})

    assert endpoint.kind is EndpointKind.POSTGRES
    assert (endpoint.host, endpoint.port, endpoint.database, endpoint.user) == (
        "pg.local",
        5432,
        "dpone_state",
        "dpone",
    )
    assert endpoint.secret() == "pw"


def test_dpone_checkpoints_connection_with_an_empty_backend_uses_the_default() -> None:
    value = json.dumps({"conn_type": "dpone_checkpoints", "host": "pg.local", "extra": {"backend": ""}})
    assert resolve("state", "checkpoints", {"AIRFLOW_CONN_STATE": value}).kind is EndpointKind.POSTGRES


@pytest.mark.parametrize("backend", ["hunter2", "mssql", 5])
def test_dpone_checkpoints_connection_with_an_unknown_backend_is_invalid_and_not_echoed(
    backend: object,
) -> None:
    value = json.dumps(
        {"conn_type": "dpone_checkpoints", "host": "h", "password": "hunter2", "extra": {"backend": backend}}
    )
    with pytest.raises(DponeError) as info:
        resolve("state", "checkpoints", {"AIRFLOW_CONN_STATE": value})

    assert info.value.code is ErrorCode.CONNECTION_INVALID
    assert "'backend' must be 'sqlite' or 'postgres'" in info.value.safe_message
    assert "hunter2" not in info.value.render() + repr(info.value.details)


@pytest.mark.parametrize(
    ("role", "value"),
    [
        ("sink", "dpone-mssql://u:p@h/db"),
        ("checkpoints", "dpone-clickhouse://u:p@h/db"),
        ("sink", '{"conn_type": "dpone_checkpoints", "extra": {"backend": "sqlite", "path": "/s.db"}}'),
    ],
)
def test_a_dpone_connection_type_of_the_wrong_kind_for_its_role_is_invalid(role: str, value: str) -> None:
    with pytest.raises(DponeError) as info:
        resolve("c", role, {"AIRFLOW_CONN_C": value})
    assert info.value.code is ErrorCode.CONNECTION_INVALID
    assert f"as the {role} connection" in info.value.safe_message


@pytest.mark.parametrize(
    ("conn_type", "host", "extra"),
    [
        ("dpone_mssql", "sql.example", {}),
        ("dpone_clickhouse", "ch.example", {"secure": "true"}),
        ("dpone_clickhouse", None, {"interface": "chdb", "path": "ch"}),
        ("dpone_checkpoints", None, {"backend": "sqlite", "path": "state.sqlite"}),
        ("dpone_checkpoints", None, {"path": "state.sqlite"}),
        ("dpone_checkpoints", "pg.example", {"backend": "postgres"}),
        ("dpone_checkpoints", "pg.example", {}),
    ],
)
def test_cli_and_airflow_hooks_read_a_dpone_connection_identically(
    conn_type: str, host: str | None, extra: dict[str, str], tmp_path: Path
) -> None:
    from airflow_provider_dpone.hooks.connection_endpoints import endpoint_from_connection

    class Conn:  # the fields of an Airflow Connection that the hooks read (no Airflow import needed)
        conn_id = "c"
        port = 4242
        schema = "db"
        login = "user"
        password = "pw"

        def __init__(self) -> None:
            self.conn_type = conn_type
            self.host = host
            self.extra_dejson = dict(extra)

    value = json.dumps(
        {
            "conn_type": conn_type,
            "host": host,
            "port": 4242,
            "schema": "db",
            "login": "user",
            "password": "pw",
            "extra": extra,
        }
    )
    from_env = resolve_endpoint(
        "c", role=_role_of(conn_type), manifest_dir=tmp_path, env={"AIRFLOW_CONN_C": value}
    )
    from_hook = endpoint_from_connection(Conn(), manifest_dir=tmp_path)  # type: ignore[arg-type]

    assert from_env == from_hook


def _role_of(conn_type: str) -> str:
    return {"dpone_mssql": "source", "dpone_clickhouse": "sink", "dpone_checkpoints": "checkpoints"}[
        conn_type
    ]


class _ClickHouseConn:
    """The fields of an Airflow ClickHouse connection the hook reads (no Airflow import needed)."""

    conn_id = "ch"
    host = "ch.example"
    port = 8123
    schema = "analytics"
    login = "analyst"

    def __init__(self, conn_type: str, extra: dict[str, object]) -> None:
        self.conn_type = conn_type
        self.extra_dejson = dict(extra)

    @property
    def password(self) -> str:
        return NASTY


def _clickhouse_json(conn_type: str, extra: dict[str, object]) -> str:
    return json.dumps(
        {
            "conn_type": conn_type,
            "host": "ch.example",
            "port": 8123,
            "schema": "analytics",
            "login": "analyst",
            "password": NASTY,
            "extra": extra,
        }
    )


@pytest.mark.parametrize("conn_type", ["clickhouse", "dpone_clickhouse"])
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"connect_timeout": "3", "send_receive_timeout": 45}, (3, 45)),
        ({"send_receive_timeout": "600"}, (None, 600)),
        ({}, (None, None)),
    ],
)
def test_cli_and_hook_read_the_clickhouse_timeout_extras_into_the_same_descriptor(
    conn_type: str, extra: dict[str, object], expected: tuple[int | None, int | None], tmp_path: Path
) -> None:
    from airflow_provider_dpone.hooks.connection_endpoints import endpoint_from_connection

    env = {"AIRFLOW_CONN_CH": _clickhouse_json(conn_type, extra)}
    from_env = resolve_endpoint("ch", role="sink", manifest_dir=tmp_path, env=env)
    from_hook = endpoint_from_connection(_ClickHouseConn(conn_type, extra), manifest_dir=tmp_path)  # type: ignore[arg-type]

    assert (from_env.connect_timeout_s, from_env.receive_timeout_s) == expected
    assert from_env == from_hook


def test_the_cli_reads_the_timeout_extras_of_a_clickhouse_uri_connection(tmp_path: Path) -> None:
    value = f"clickhouse://analyst:{quote(NASTY, safe='')}@ch.example:8123/analytics?connect_timeout=4&send_receive_timeout=90"
    endpoint = resolve_endpoint("ch", role="sink", manifest_dir=tmp_path, env={"AIRFLOW_CONN_CH": value})
    assert (endpoint.connect_timeout_s, endpoint.receive_timeout_s) == (4, 90)
    assert endpoint.secret() == NASTY


@pytest.mark.parametrize("bad", ["soon", 0, -5, 1.5, True, 10**9, "12s"])
def test_a_bad_timeout_extra_is_connection_invalid_from_the_cli_without_the_password(
    bad: object, tmp_path: Path
) -> None:
    env = {"AIRFLOW_CONN_CH": _clickhouse_json("clickhouse", {"send_receive_timeout": bad})}
    with pytest.raises(DponeError) as refused:
        resolve_endpoint("ch", role="sink", manifest_dir=tmp_path, env=env)
    assert refused.value.code is ErrorCode.CONNECTION_INVALID
    assert "send_receive_timeout" in refused.value.safe_message
    shown = str(refused.value) + repr(refused.value.details) + refused.value.render()
    assert NASTY not in shown and "analyst" not in shown
    assert refused.value.__cause__ is not None and NASTY not in repr(refused.value.__cause__)


def test_a_relative_chdb_connection_path_hangs_off_the_manifest_folders_real_path(tmp_path: Path) -> None:
    """Red before: through a linked manifest folder the chDB target was another folder (by its text), so the
    CLI (the linked path) and the operator (the DAG file's real folder) each saw "another target" (exit 3)."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    env = {"AIRFLOW_CONN_T": "chdb:///clickhouse"}

    through_link = resolve("t", "sink", env, base=tmp_path / "link")
    direct = resolve("t", "sink", env, base=real)

    assert through_link.path == direct.path == str(real.resolve() / "clickhouse")


def test_an_ipv6_host_of_the_uri_form_is_bracketed_for_the_client_and_one_place_either_way() -> None:
    """Red before: Airflow's URI form hands the address over without brackets and the HTTP client built
    ``http://::1:8123`` (every request failed, ``target_unreachable``)."""
    from airflow_provider_dpone.adapters.clickhouse.client import url_host

    endpoint = resolve("t", "sink", {"AIRFLOW_CONN_T": "clickhouse://default@[::1]:8123/db"})
    assert endpoint.host == "::1"
    assert url_host("::1") == url_host("[::1]") == "[::1]"
    assert url_host("ch.example") == "ch.example" and url_host("127.0.0.1") == "127.0.0.1"


@pytest.mark.parametrize(
    "value",
    [
        "sqlite:////data/team@x/source.sqlite",
        "clickhouse://ch.example:8123/db?secure=false&note_free=1",
    ],
    ids=["an-at-sign-in-a-path", "an-unknown-key-named-when-plain"],
)
def test_an_at_sign_outside_the_login_is_no_malformed_uri(value: str) -> None:
    """Red with the first form of the password check: any '@' after an empty host part was refused."""
    if value.startswith("sqlite"):
        assert resolve("src", "source", {"AIRFLOW_CONN_SRC": value}).path == "/data/team@x/source.sqlite"
        return
    with pytest.raises(DponeError) as info:
        resolve("t", "sink", {"AIRFLOW_CONN_T": value})
    assert "not shown" in info.value.render()  # a query key close to no known one is never echoed


def test_an_unknown_uri_extra_close_to_a_known_one_suggests_the_known_one_and_never_shows_itself() -> None:
    with pytest.raises(DponeError) as info:
        resolve("t", "sink", {"AIRFLOW_CONN_T": "clickhouse://ch.example:8123/db?secrue=false"})
    assert "'secrue'" not in info.value.render() and "did you mean 'secure'?" in info.value.render()
