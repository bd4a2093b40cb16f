"""Loading and strict validation of manifests: every problem at once, with paths, lines and hints."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import ExportPath, Manifest
from airflow_provider_dpone.manifests import LoadedManifest, load_manifest, load_manifest_dict

VALID = textwrap.dedent(
    """\
    kind: native_transfer
    name: orders
    source:
      type: mssql
      connection: orders_mssql
      table: dbo.orders
      partitioning: {kind: day, column: order_date}
      incremental: {cursor: updated_at}
    sink:
      type: clickhouse
      connection: analytics_clickhouse
      table: analytics.orders
      strategy: incremental_append
    checkpoints:
      connection: sqlite:///state.sqlite
    quality:
      checks:
        - {type: row_count}
    """
)


def write(tmp_path: Path, text: str, name: str = "manifest.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems_of(path: Path) -> list[dict[str, Any]]:
    with pytest.raises(DponeError) as info:
        load_manifest(path)
    assert info.value.code is ErrorCode.MANIFEST_INVALID
    problems: list[dict[str, Any]] = info.value.details["problems"]
    assert len(info.value.hint_lines) == len(problems)
    return problems


def by_path(problems: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["path"]: p for p in problems}


def test_valid_manifest_loads_with_defaults_identity_and_folder(tmp_path: Path) -> None:
    loaded = load_manifest(write(tmp_path, VALID))

    assert isinstance(loaded, LoadedManifest)
    assert isinstance(loaded.manifest, Manifest)
    assert loaded.manifest_dir == tmp_path.resolve() or loaded.manifest_dir == tmp_path
    assert loaded.manifest.source.export is ExportPath.LAZY_PLAN
    assert loaded.normalized["sink"]["options"] == {"durable_quality_replay": False}
    assert loaded.normalized["source"]["chunk_rows"] == 50_000
    assert loaded.identity.startswith("sha256:") and len(loaded.identity) == 7 + 64
    assert loaded.route.describe() == "dbo.orders -> analytics.orders (incremental_append)"


def test_unknown_key_names_its_dotted_path_and_the_closest_valid_key(tmp_path: Path) -> None:
    text = VALID.replace(
        "  strategy: incremental_append\n", "  strategy: incremental_append\n  optoins: {}\n"
    )
    problems = problems_of(write(tmp_path, text))

    assert len(problems) == 1
    problem = problems[0]
    assert problem["kind"] == "unknown_key"
    assert problem["path"] == "sink.optoins"
    assert problem["suggestion"] == "sink.options"
    assert "did you mean `sink.options`?" in problem["message"]
    assert problem["line"] == 14


def test_every_problem_is_reported_together(tmp_path: Path) -> None:
    text = """\
    kind: native_transfer
    name: orders
    extra_top: 1
    source:
      type: mssql
      connection: orders_mssql
      tabel: dbo.orders
      chunk_rows: "5000"
      export: fast
    sink:
      type: clickhouse
      connection: analytics_clickhouse
      table: analytics.orders
      strategy: incremental_append
      options: {durable_quality_replay: "true"}
    checkpoints: {}
    quality:
      checks:
        - {type: row_count, severity: fatal}
    """
    found = by_path(problems_of(write(tmp_path, text)))

    assert found["extra_top"]["kind"] == "unknown_key"
    assert found["source.tabel"]["suggestion"] == "source.table"
    assert found["source.table"]["kind"] == "missing_key"
    assert found["source.chunk_rows"]["kind"] == "wrong_type"
    assert (found["source.chunk_rows"]["expected"], found["source.chunk_rows"]["found"]) == (
        "integer",
        "string",
    )
    assert found["source.export"]["kind"] == "invalid_value"
    assert "'file_artifact' or 'lazy_plan'" in found["source.export"]["message"]
    assert found["sink.options.durable_quality_replay"]["found"] == "string"
    assert found["checkpoints.connection"]["kind"] == "missing_key"
    assert found["quality.checks[0].severity"]["kind"] == "invalid_value"
    assert len(found) == 8


def test_problem_messages_name_the_found_type_never_the_value(tmp_path: Path) -> None:
    secretish = "s3cr3t-Value-42"
    text = VALID.replace("table: dbo.orders", f"table: dbo.orders\n  chunk_rows: {secretish}").replace(
        "kind: day", f"kind: {secretish}"
    )
    with pytest.raises(DponeError) as info:
        load_manifest(write(tmp_path, text))

    rendered = info.value.render() + repr(info.value.details)
    assert secretish not in rendered
    assert "expected integer, found string" in rendered


def test_yaml_syntax_error_reports_line_and_column_without_the_line_text(tmp_path: Path) -> None:
    text = "kind: native_transfer\nname: [unclosed\nsource: {password: hunter2}\n"
    problems = problems_of(write(tmp_path, text))

    assert len(problems) == 1
    assert problems[0]["kind"] == "yaml_syntax"
    assert problems[0]["line"] == 3
    assert problems[0]["column"] is not None
    assert "hunter2" not in problems[0]["message"]


def test_duplicate_keys_are_errors_with_both_lines(tmp_path: Path) -> None:
    text = VALID.replace(
        "  table: analytics.orders\n", "  table: analytics.orders\n  table: analytics.other\n"
    )
    problems = problems_of(write(tmp_path, text))

    assert [(p["kind"], p["path"], p["line"]) for p in problems] == [("duplicate_key", "sink.table", 13)]
    assert "first written at line 12" in problems[0]["message"]


def test_dates_stay_strings_and_yaml11_booleans_are_not_booleans(tmp_path: Path) -> None:
    text = VALID.replace(
        "partitioning: {kind: day, column: order_date}",
        "partitioning: {kind: list, column: order_date, values: [2026-01-01, 2026-01-02, 010]}",
    )
    loaded = load_manifest(write(tmp_path, text))
    assert loaded.manifest.source.partitioning.values == ("2026-01-01", "2026-01-02", 10)

    for word in ("yes", "on", "True", "no", "off"):
        bad = VALID.replace(
            "strategy: incremental_append", f"strategy: incremental_append\n  order_by: {word}"
        )
        problems = problems_of(write(tmp_path, bad, f"{word}.yaml"))
        assert [(p["path"], p["found"]) for p in problems] == [("sink.order_by", "string")]


def test_no_coercion_of_strings_to_numbers_or_numbers_to_strings(tmp_path: Path) -> None:
    text = VALID.replace("name: orders", "name: 12345").replace(
        "partitioning: {kind: day, column: order_date}",
        "partitioning: {kind: integer_range, column: id, size: '100'}",
    )
    found = by_path(problems_of(write(tmp_path, text)))

    assert found["name"]["message"] == "expected string, found integer"
    assert found["source.partitioning.size"]["message"].startswith("expected integer, found string")


def test_model_rules_are_reported_as_invalid_values(tmp_path: Path) -> None:
    text = VALID.replace("partitioning: {kind: day, column: order_date}", "partitioning: {kind: day}")
    problems = problems_of(write(tmp_path, text))

    assert [(p["path"], p["kind"]) for p in problems] == [("source.partitioning", "invalid_value")]
    assert "needs a column" in problems[0]["message"]


@pytest.mark.parametrize(
    "value",
    [
        "mssql://etl:hunter2@db:1433/sales",
        "postgresql://u:hunter2@pg/state",
        "sqlite://user:hunter2@/state.sqlite",
        "chdb://u:hunter2@/clickhouse",
    ],
)
def test_a_connection_uri_with_a_password_is_refused(tmp_path: Path, value: str) -> None:
    text = VALID.replace("connection: sqlite:///state.sqlite", f"connection: '{value}'")
    with pytest.raises(DponeError) as info:
        load_manifest(write(tmp_path, text))

    problems = info.value.details["problems"]
    assert [(p["path"], p["kind"]) for p in problems] == [("checkpoints.connection", "forbidden_secret")]
    assert "must not contain a password" in problems[0]["message"]
    assert "hunter2" not in info.value.render() + repr(info.value.details)


@pytest.mark.parametrize(
    "value",
    [
        "clickhouse://analytics:8123/db",  # not an embedded scheme: must come from a connection
        "sqlite://host/state.sqlite",  # a host
        "sqlite:///state.sqlite?mode=ro",  # a query
        "sqlite:///",  # no path
    ],
)
def test_inline_uris_are_limited_to_credential_free_paths(tmp_path: Path, value: str) -> None:
    text = VALID.replace("connection: sqlite:///state.sqlite", f"connection: '{value}'")
    problems = problems_of(write(tmp_path, text))

    assert [(p["path"], p["kind"]) for p in problems] == [("checkpoints.connection", "invalid_connection")]


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ('{"conn_type": "dpone_clickhouse", "password": "hunter2"}', "forbidden_secret"),
        ("{'conn_type': 'mssql', 'PWD': 'hunter2'}", "forbidden_secret"),
        ('{"conn_type": "x", "extra": {"token": "hunter2"}}', "forbidden_secret"),
        ('{"conn_type": "x", "secret" : "hunter2"}', "forbidden_secret"),
        ('{"conn_type": "dpone_clickhouse", "host": "hunter2"}', "invalid_connection"),
        ("my hunter2 target", "invalid_connection"),
        ("hunter2@db", "invalid_connection"),
        ("x" * 251, "invalid_connection"),
    ],
)
def test_a_connection_field_that_is_no_name_is_refused_without_echoing_it(
    tmp_path: Path, value: str, kind: str
) -> None:
    """JSON written inline (or any text that is no connection ID) used to reach the lookup, whose error
    repeated it, a password included, as the name of an AIRFLOW_CONN_ variable to set."""
    text = VALID.replace("connection: analytics_clickhouse", f"connection: {value!r}")
    with pytest.raises(DponeError) as info:
        load_manifest(write(tmp_path, text))

    problems = info.value.details["problems"]
    assert [(p["path"], p["kind"]) for p in problems] == [("sink.connection", kind)]
    shown = info.value.render() + repr(info.value.details) + "".join(info.value.hint_lines)
    assert "hunter2" not in shown and "x" * 251 not in shown


@pytest.mark.parametrize("name", ["analytics_clickhouse", "ch.prod-1", "team:ch/prod", "a#b!(c)", "x" * 250])
def test_connection_names_take_every_character_airflow_admits_in_a_connection_id(
    tmp_path: Path, name: str
) -> None:
    load_manifest(write(tmp_path, VALID.replace("connection: analytics_clickhouse", f"connection: {name!r}")))


@pytest.mark.parametrize(
    "query",
    [
        "x mssql://u:hunter2@h/db",
        # red before: a blank after the ';', the keyword first, blanks around '=', an unencoded '/' or '?'
        "OPENROWSET('SQLNCLI', 'Server=srv; Uid=sa; Pwd=hunter2;', 'SELECT 1')",
        "OPENROWSET('SQLNCLI', 'Password=hunter2;Server=srv', 'SELECT 1')",
        "OPENROWSET('SQLNCLI', 'Server=srv;Password = hunter2', 'SELECT 1')",
        "x mssql://etl:hunter2/y@host/db",
        "x mssql://etl:hun?ter2@host/db",
    ],
)
def test_a_password_anywhere_else_in_the_manifest_is_refused(tmp_path: Path, query: str) -> None:
    text = VALID.replace("table: dbo.orders", f"table: dbo.orders\n  query: {json.dumps(query)}")
    found = by_path(problems_of(write(tmp_path, text)))

    assert found["source.query"]["kind"] == "forbidden_secret"


def test_a_key_holding_a_uri_with_a_password_is_never_shown(tmp_path: Path) -> None:
    """Red before: ``connection:mssql://...`` (no blank after the colon) is a key to YAML, and the
    unknown-key problem printed it whole, password included."""
    text = VALID.replace(
        "connection: analytics_clickhouse", "connection:mssql://etl:hunter2@host:1433/sales: x"
    )
    with pytest.raises(DponeError) as info:
        load_manifest(write(tmp_path, text))

    assert "hunter2" not in info.value.render() + json.dumps(info.value.to_json())


@pytest.mark.parametrize(
    ("field", "text"),
    [
        (
            "source.query",
            "table: dbo.orders\n  query: \"SELECT * FROM dbo.orders WHERE order_date = '{{ ds }}'\"",
        ),
        ("source.table", 'table: "{% if params.x %}dbo.a{% else %}dbo.orders{% endif %}"'),
    ],
    ids=["expression", "statement"],
)
def test_a_jinja_template_in_a_manifest_file_is_refused_never_sent_as_is(
    tmp_path: Path, field: str, text: str
) -> None:
    """Nothing renders a manifest file: a daily query filtering on ``'{{ ds }}'`` matched no row, and every
    Airflow run succeeded with nothing to move while the source's days were never loaded."""
    found = by_path(problems_of(write(tmp_path, VALID.replace("table: dbo.orders", text))))

    assert found[field]["kind"] == "invalid_value"
    assert "never renders" in found[field]["message"] and "as a dict" in found[field]["message"]
    assert "{{ ds }}" not in found[field]["message"] and "params.x" not in found[field]["message"]  # no value


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("source.query", "table: dbo.orders\n  query: \"SELECT * FROM dbo.orders WHERE d <= '${END_DATE}'\""),
        ("source.table", 'table: "${TABLE:-dbo.orders}"'),
    ],
    ids=["query", "table-with-default"],
)
def test_a_shell_variable_in_a_manifest_file_is_refused_never_sent_as_is(
    tmp_path: Path, field: str, text: str
) -> None:
    """Red before: ``END_DATE=... dpone run`` left ``'${END_DATE}'`` in the query, which matched no row; the
    run exited 0 with "the source holds no rows" and 0 of 300 rows moved."""
    found = by_path(problems_of(write(tmp_path, VALID.replace("table: dbo.orders", text))))

    assert found[field]["kind"] == "invalid_value"
    assert "never substitutes" in found[field]["message"]
    assert "END_DATE" not in found[field]["message"] and "TABLE" not in found[field]["message"]


def test_a_dollar_sign_that_opens_no_shell_variable_is_sql(tmp_path: Path) -> None:
    query = "table: dbo.orders\n  query: \"SELECT price$ , '$5' AS s, '${' || '}' AS t FROM dbo.orders\""
    load_manifest(write(tmp_path, VALID.replace("table: dbo.orders", query)))


def test_a_rendered_dict_passes_and_an_unrendered_one_is_refused(tmp_path: Path) -> None:
    import yaml

    data = yaml.safe_load(VALID)
    data["source"]["query"] = "SELECT * FROM dbo.orders WHERE note = '{single} braces'"
    load_manifest_dict(data, "dag:orders", manifest_dir=tmp_path)
    data["source"]["query"] = "SELECT * FROM dbo.orders WHERE order_date = '{{ ds }}'"  # {% raw %} kept it
    with pytest.raises(DponeError) as info:
        load_manifest_dict(data, "dag:orders", manifest_dir=tmp_path)
    assert set(by_path(info.value.details["problems"])) == {"source.query"}


def test_inline_relative_and_absolute_paths_are_admitted(tmp_path: Path) -> None:
    text = VALID.replace(
        "connection: sqlite:///state.sqlite", "connection: sqlite:////var/lib/dpone/state.db"
    )
    load_manifest(write(tmp_path, text))


def test_missing_unreadable_and_non_mapping_manifests(tmp_path: Path) -> None:
    with pytest.raises(DponeError) as missing:
        load_manifest(tmp_path / "nope.yaml")
    assert missing.value.code is ErrorCode.MANIFEST_INVALID
    assert "not found" in missing.value.safe_message

    assert problems_of(write(tmp_path, ""))[0]["message"].startswith("the manifest is empty")
    assert "found list" in problems_of(write(tmp_path, "- a\n- b\n"))[0]["message"]
    multi = problems_of(write(tmp_path, "a: 1\n---\nb: 2\n"))
    assert multi[0]["kind"] == "yaml_syntax"


def test_alias_bombs_are_refused_quickly(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    problems = problems_of(write(tmp_path, "\n".join(lines) + "\n"))

    assert "too many values" in problems[0]["message"]


def test_load_manifest_dict_validates_the_same_way(tmp_path: Path) -> None:
    import yaml

    data = yaml.safe_load(VALID)
    loaded = load_manifest_dict(data, "dag:orders", manifest_dir=tmp_path)
    assert loaded.manifest_dir == tmp_path
    assert loaded.identity == load_manifest(write(tmp_path, VALID)).identity

    data["sink"]["options"] = {"durable_quality_replay": "true"}
    data["source"]["columns"] = ["id", object()]
    data[7] = "x"
    with pytest.raises(DponeError) as info:
        load_manifest_dict(data, "dag:orders")
    found = by_path(info.value.details["problems"])
    assert set(found) == {"sink.options.durable_quality_replay", "source.columns[1]", "7"}
    assert found["source.columns[1]"]["message"] == "expected a JSON value, found object"


def test_validation_opens_no_file_but_the_manifest_and_no_socket(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.replace("sqlite:///state.sqlite", "sqlite:///does/not/exist.sqlite"))
    events: list[tuple[str, str]] = []
    recording = [True]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if recording[0] and event in ("open", "socket.connect", "subprocess.Popen", "sqlite3.connect"):
            events.append((event, str(args[0]) if args else ""))

    sys.addaudithook(hook)  # audit hooks cannot be removed: the flag switches this one off
    try:
        load_manifest(path)
    finally:
        recording[0] = False

    opened = [target for event, target in events if event == "open" and not target.endswith((".py", ".pyc"))]
    assert opened == [str(path)]
    assert not [e for e in events if e[0] != "open"]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT CASE WHEN u.password = '' THEN 1 ELSE 0 END AS blank FROM dbo.orders u",
        "SELECT * FROM dbo.orders WHERE pwd = ''",
        "SELECT a.id FROM dbo.orders a JOIN legacy b ON b.passwd=a.passwd",
        "SELECT 'https://crm.example.com:8443/u/jane@example.com' AS link FROM dbo.orders",
        "SELECT 'http://intranet:8080/login?next=/me&user=bob@corp.com' AS link FROM dbo.orders",
    ],
)
def test_a_query_that_compares_a_password_column_or_holds_a_url_is_no_secret(
    tmp_path: Path, query: str
) -> None:
    """Red with the first broadening of the password check (a SQL comparison read as a parameter, a port as a
    password): ordinary queries were refused."""
    load_manifest(
        write(
            tmp_path, VALID.replace("table: dbo.orders", f"table: dbo.orders\n  query: {json.dumps(query)}")
        )
    )


@pytest.mark.parametrize(
    "value",
    [
        "OPENROWSET('SQLNCLI', 'srv01';'etl';'hunter2', 'SELECT 1')",
        "OPENDATASOURCE('SQLNCLI', 'Data Source=srv01;User ID=etl;Password=hunter2').db.dbo.t",
    ],
)
def test_sql_servers_own_credential_arguments_are_refused(tmp_path: Path, value: str) -> None:
    found = by_path(
        problems_of(
            write(
                tmp_path,
                VALID.replace("table: dbo.orders", f"table: dbo.orders\n  query: {json.dumps(value)}"),
            )
        )
    )

    assert found["source.query"]["kind"] == "forbidden_secret"


@pytest.mark.parametrize("written", ["password: !hunter2", "password: *hunter2"])
def test_an_unquoted_secret_yaml_reads_as_a_tag_or_an_alias_is_not_echoed(
    tmp_path: Path, written: str
) -> None:
    """Red before: the YAML error quoted the tag or alias, the password itself."""
    with pytest.raises(DponeError) as info:
        load_manifest(write(tmp_path, VALID.replace("table: dbo.orders", f"table: dbo.orders\n  {written}")))

    assert "hunter2" not in info.value.render() + json.dumps(info.value.to_json())
