"""``sink.options.durable_quality_replay``: a strict boolean, default false, near-spellings refused."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.manifests import load_manifest
from airflow_provider_dpone.manifests.yaml_strict import StrictSafeLoader

BASE = textwrap.dedent(
    """\
    kind: native_transfer
    name: orders
    source: {type: sqlite, connection: sqlite:///source.sqlite, table: orders}
    sink:
      type: clickhouse
      connection: chdb:///clickhouse
      table: demo.orders
      strategy: incremental_append
    {options}
    checkpoints: {connection: sqlite:///state.sqlite}
    """
)


def manifest_with(tmp_path: Path, options_block: str) -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(BASE.replace("{options}", options_block), encoding="utf-8")
    return path


def selector_error(tmp_path: Path, written: str) -> dict[str, object]:
    path = manifest_with(tmp_path, f"  options:\n    durable_quality_replay: {written}")
    with pytest.raises(DponeError) as info:
        load_manifest(path)
    assert info.value.code is ErrorCode.MANIFEST_INVALID
    (problem,) = info.value.details["problems"]
    return problem


def test_selector_defaults_to_false(tmp_path: Path) -> None:
    loaded = load_manifest(manifest_with(tmp_path, ""))
    assert loaded.manifest.sink.options.durable_quality_replay is False
    assert loaded.normalized["sink"]["options"] == {"durable_quality_replay": False}


@pytest.mark.parametrize(("written", "expected"), [("true", True), ("false", False)])
def test_selector_accepts_only_yaml_true_and_false(tmp_path: Path, written: str, expected: bool) -> None:
    path = manifest_with(tmp_path, f"  options:\n    durable_quality_replay: {written}")
    assert load_manifest(path).manifest.sink.options.durable_quality_replay is expected


@pytest.mark.parametrize(
    ("written", "found"),
    [
        ('"true"', "string"),
        ("'false'", "string"),
        ("1", "integer"),
        ("0", "integer"),
        ("yes", "string"),
        ("no", "string"),
        ("on", "string"),
        ("off", "string"),
        ("True", "string"),
        ("y", "string"),
        ("~", "null"),
        ("[true]", "list"),
        ("{enabled: true}", "mapping"),
    ],
)
def test_selector_rejects_anything_but_a_real_boolean(tmp_path: Path, written: str, found: str) -> None:
    problem = selector_error(tmp_path, written)

    assert problem["path"] == "sink.options.durable_quality_replay"
    assert problem["kind"] == "wrong_type"
    assert (problem["expected"], problem["found"]) == ("boolean", found)


def test_pyyaml_safeloader_would_have_read_yes_as_true_but_ours_does_not() -> None:
    # Why the strict loader exists: YAML 1.1 booleans.
    assert yaml.safe_load("x: yes") == {"x": True}
    assert yaml.load("x: yes", Loader=StrictSafeLoader) == {"x": "yes"}
    assert yaml.load("x: true", Loader=StrictSafeLoader) == {"x": True}
    with pytest.raises(yaml.YAMLError):
        yaml.load("x: !!bool yes", Loader=StrictSafeLoader)


@pytest.mark.parametrize(
    ("block", "path", "suggestion"),
    [
        ("  options:\n    durable_quality_replays: true", "sink.options.durable_quality_replays", None),
        ("  options:\n    durable_quality_reply: true", "sink.options.durable_quality_reply", None),
        ("  options:\n    Durable_Quality_Replay: true", "sink.options.Durable_Quality_Replay", None),
        ("  option:\n    durable_quality_replay: true", "sink.option", "sink.options"),
        ("  durable_quality_replay: true", "sink.durable_quality_replay", None),
    ],
)
def test_near_spellings_name_the_path_and_the_right_key(
    tmp_path: Path, block: str, path: str, suggestion: str | None
) -> None:
    with pytest.raises(DponeError) as info:
        load_manifest(manifest_with(tmp_path, block))
    problems = {p["path"]: p for p in info.value.details["problems"]}

    assert problems[path]["kind"] == "unknown_key"
    expected = suggestion or "sink.options.durable_quality_replay"
    if path == "sink.durable_quality_replay":
        # Nothing at sink level is close: the message lists the valid keys instead.
        assert "options" in problems[path]["message"]
    else:
        assert problems[path]["suggestion"] == expected
        assert f"did you mean `{expected}`?" in problems[path]["message"]
