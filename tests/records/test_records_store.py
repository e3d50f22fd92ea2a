"""The record store (peagle_deploy.records) against moto's SSM: the round trip of each
kind, the records today's users have (schema_version 1), and every refusal of the reader,
each one line that names the parameter.

`data/v1-*.json` were written by peagle-deploy's own code before the envelope (commit
fc0f6a9: `DeploymentManifest.from_plan(...).model_dump_json()` and the experiment
`ExperimentRecord` of `experiment_plan(spec)`), byte for byte what real accounts hold.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from peagle_deploy.cli.app import main
from peagle_deploy.errors import InputError
from peagle_deploy.records import (
    MAX_PARAMETER_BYTES,
    DeploymentManifest,
    ExperimentRecord,
    Kind,
    RecordError,
    RecordPath,
    StoredRecord,
    find_records,
    read_record,
    write_record,
)

DATA = Path(__file__).parent / "data"
REGION = "us-east-1"
TYPES: dict[str, type[StoredRecord]] = {
    "manifest": DeploymentManifest,
    "experiment": ExperimentRecord,
}


@pytest.fixture
def ssm(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(var, "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield boto3.client("ssm", region_name=REGION)


def _legacy(kind: str) -> str:
    return (DATA / f"v1-{kind}.json").read_text(encoding="utf-8")


def _record(kind: str) -> StoredRecord:
    """The fixture's record, built by pydantic alone (not by the code under test)."""
    doc = json.loads(_legacy(kind))
    assert doc.pop("schema_version") == 1
    return TYPES[kind].model_validate(doc)


def _stored(ssm: Any, name: str) -> dict[str, Any]:
    value = ssm.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]
    return dict(json.loads(value))


def _put(ssm: Any, name: str, value: str) -> None:
    ssm.put_parameter(Name=name, Value=value, Type="SecureString", Overwrite=True)


def _refused(ssm: Any, kind: str, stage: str, endpoint: str) -> str:
    with pytest.raises(RecordError) as info:
        read_record(ssm, TYPES[kind], stage, endpoint)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"/peagle-deploy/{stage}/{endpoint}/{kind} ")
    return message


@pytest.mark.parametrize("kind", ["manifest", "experiment"])
def test_each_kind_round_trips_as_an_envelope(ssm: Any, kind: str) -> None:
    record = _record(kind)
    tags = [{"Key": "peagle:managed", "Value": "true"}]
    name = write_record(ssm, record, tags=tags)
    assert name == f"/peagle-deploy/dev/{record.endpoint_name}/{kind}"
    assert read_record(ssm, TYPES[kind], "dev", record.endpoint_name) == record
    other = "experiment" if kind == "manifest" else "manifest"
    assert read_record(ssm, TYPES[other], "dev", record.endpoint_name) is None
    assert read_record(ssm, TYPES[kind], "prod", record.endpoint_name) is None

    parameter = ssm.get_parameter(Name=name)["Parameter"]
    assert parameter["Type"] == "SecureString"  # a spec's env may hold secrets
    doc = _stored(ssm, name)
    assert set(doc) == {"kind", "schema_version", "stage", "endpoint_name", "region", "body"}
    assert (doc["kind"], doc["schema_version"], doc["stage"]) == (kind, 2, "dev")
    assert not {"stage", "endpoint_name", "region", "schema_version"} & doc["body"].keys()
    listed = ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=name)["TagList"]
    assert tags[0] in listed


@pytest.mark.parametrize("kind", ["manifest", "experiment"])
def test_a_record_written_before_the_envelope_is_read_and_rewritten(ssm: Any, kind: str) -> None:
    """schema_version 1 (what every account holds today) is read, migrated in memory;
    the next write stores version 2, which reads back the same."""
    record = _record(kind)
    name = RecordPath("dev", record.endpoint_name, kind).name  # type: ignore[arg-type]
    _put(ssm, name, _legacy(kind))
    old = read_record(ssm, TYPES[kind], "dev", record.endpoint_name)
    assert old == record
    write_record(ssm, old)
    assert _stored(ssm, name)["schema_version"] == 2
    assert read_record(ssm, TYPES[kind], "dev", record.endpoint_name) == record


def _envelope(kind: str = "manifest") -> dict[str, Any]:
    doc = json.loads(_legacy(kind))
    identity = {k: doc.pop(k) for k in ("stage", "endpoint_name", "region")}
    del doc["schema_version"]
    return {"kind": kind, "schema_version": 2, **identity, "body": doc}


def _with(change: Callable[[dict[str, Any]], object]) -> str:
    doc = _envelope()
    change(doc)
    return json.dumps(doc)


def _legacy_with(change: Callable[[dict[str, Any]], object]) -> str:
    doc = json.loads(_legacy("manifest"))
    change(doc)
    return json.dumps(doc)


ENDPOINT = "peagle-qwen3-coder-30b-a3b-instruct-dev"
REFUSALS: list[tuple[str, str, str]] = [
    ("not JSON", "{not json", "is not JSON peagle-deploy reads"),
    ("a key twice", '{"kind": "manifest", "kind": "experiment"}', "is not JSON"),
    ("not an object", "[1, 2]", "is not a JSON object"),
    ("a newer version", _with(lambda d: d.update(schema_version=3)), "has schema_version 3;"),
    ("a version as text", _with(lambda d: d.update(schema_version="2")), "schema_version '2'"),
    ("a version as true", _with(lambda d: d.update(schema_version=True)), "schema_version True"),
    ("no version", _with(lambda d: d.pop("schema_version")), "has schema_version None"),
    ("an unknown kind", _with(lambda d: d.update(kind="promotion")), "unknown kind 'promotion'"),
    (
        "a tampered kind",
        _with(lambda d: d.update(kind="experiment")),
        "holds a record of kind 'experiment', not 'manifest'",
    ),
    (
        "another stage",
        _with(lambda d: d.update(stage="prod")),
        f"holds the manifest of prod/{ENDPOINT}, not of dev/{ENDPOINT}",
    ),
    (
        "another endpoint",
        _with(lambda d: d.update(endpoint_name="peagle-other-dev")),
        "holds the manifest of dev/peagle-other-dev, not of dev/",
    ),
    ("another region", _with(lambda d: d.update(region="eu-west-1")), "region eu-west-1, not us"),
    (
        "the body naming its stage",
        _with(lambda d: d["body"].update(stage="dev")),
        "repeats stage in its body",
    ),
    (
        "a spec of another stage",
        _with(lambda d: d["body"]["spec"].update(stage="prod")),
        "its spec is for stage prod, not dev",
    ),
    (
        "a spec naming another endpoint",
        _with(lambda d: d["body"]["spec"].update(endpoint_name="peagle-other-dev")),
        "its spec names endpoint peagle-other-dev",
    ),
    (
        "an unknown body field",
        _with(lambda d: d["body"].update(surprise=1)),
        "is invalid at body.surprise: Extra inputs are not permitted",
    ),
    (
        "an unknown envelope field",
        _with(lambda d: d.update(signed_by="me")),
        "is invalid at signed_by",
    ),
    ("no body", _with(lambda d: d.pop("body")), "is invalid at body: Field required"),
    (
        "a version-1 record of another stage",
        _legacy_with(lambda d: d.update(stage="prod")),
        "holds the manifest of prod/",
    ),
    (
        "a version-1 record missing a field",
        _legacy_with(lambda d: d.pop("content_hash")),
        "is invalid at content_hash: Field required",
    ),
]


@pytest.mark.parametrize(
    ("value", "problem"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_the_reader_refuses_what_it_cannot_trust(ssm: Any, value: str, problem: str) -> None:
    _put(ssm, f"/peagle-deploy/dev/{ENDPOINT}/manifest", value)
    message = _refused(ssm, "manifest", "dev", ENDPOINT)
    assert problem in message
    assert message.endswith("redeploy dev to rewrite it (peagle deploy ... --stage dev)")


def test_a_record_copied_to_another_stage_or_kind_is_refused(ssm: Any) -> None:
    """Copied as it is, by anyone who may write the other path: trusted by no name."""
    record = _record("manifest")
    value = _stored(ssm, write_record(ssm, record))
    _put(ssm, f"/peagle-deploy/prod/{ENDPOINT}/manifest", json.dumps(value))
    assert "holds the manifest of dev/" in _refused(ssm, "manifest", "prod", ENDPOINT)
    _put(ssm, f"/peagle-deploy/dev/{ENDPOINT}/experiment", json.dumps(value))
    message = _refused(ssm, "experiment", "dev", ENDPOINT)
    assert "kind 'manifest', not 'experiment'" in message
    assert "aws ssm delete-parameter" in message  # the experiment's way out
    # A version-1 manifest has no kind: at an experiment's path it is read as one, and fails.
    _put(ssm, f"/peagle-deploy/dev/{ENDPOINT}/experiment", _legacy("manifest"))
    assert "is invalid at" in _refused(ssm, "experiment", "dev", ENDPOINT)


def test_a_record_copied_to_another_region_is_refused(ssm: Any) -> None:
    record = _record("experiment")
    value = _stored(ssm, write_record(ssm, record))
    west = boto3.client("ssm", region_name="us-west-2")
    _put(west, record.parameter_name, json.dumps(value))
    assert "written for region us-east-1, not us-west-2" in _refused(
        west, "experiment", "dev", record.endpoint_name
    )


def test_the_writer_picks_the_tier_and_refuses_what_ssm_cannot_hold(ssm: Any) -> None:
    record = _record("manifest")
    assert isinstance(record, DeploymentManifest)
    big = record.model_copy(update={"gate_results": [{"kind": "level", "n": "x" * 200}] * 20})
    write_record(ssm, big)
    tiers = {p["Name"]: p["Tier"] for p in ssm.describe_parameters()["Parameters"]}
    assert tiers == {record.parameter_name: "Advanced"}
    huge = record.model_copy(update={"gate_results": [{"kind": "level", "n": "x" * 200}] * 40})
    with pytest.raises(RecordError, match=f"over SSM's {MAX_PARAMETER_BYTES}-byte") as info:
        write_record(ssm, huge)
    assert "\n" not in str(info.value)
    assert read_record(ssm, DeploymentManifest, "dev", record.endpoint_name) == big  # unchanged


def test_find_records_lists_only_names_that_follow_the_rule(ssm: Any) -> None:
    record = _record("manifest")
    for i in range(12):  # more than one page of GetParametersByPath (10 by default)
        endpoint = f"e{i:02d}"
        write_record(ssm, record.model_copy(update={"endpoint_name": endpoint}))
    write_record(ssm, record.model_copy(update={"stage": "prod"}))
    write_record(ssm, _record("experiment"))
    for stray in ("/peagle-deploy/dev/notes", f"/peagle-deploy/dev/{ENDPOINT}/manifest/old"):
        ssm.put_parameter(Name=stray, Value="x", Type="String")
    dev = find_records(ssm, "manifest", stage="dev")
    assert [p.endpoint_name for p in dev] == [f"e{i:02d}" for i in range(12)]
    everywhere = find_records(ssm, "manifest", endpoint_name=ENDPOINT)
    assert [p.name for p in everywhere] == [f"/peagle-deploy/prod/{ENDPOINT}/manifest"]
    assert [p.endpoint_name for p in find_records(ssm, "experiment")] == ["peagle-gpt-oss-20b-dev"]


@pytest.mark.parametrize(
    ("stage", "endpoint", "kind", "field"),
    [("dev/x", "e", "manifest", "stage"), ("dev", "", "manifest", "endpoint_name")],
)
def test_the_path_rule_refuses_what_is_not_one_segment(
    stage: str, endpoint: str, kind: Kind, field: str
) -> None:
    with pytest.raises(InputError, match=f"^{field}: "):
        RecordPath(stage, endpoint, kind)
    assert RecordPath.parse("/peagle-deploy/dev/e/manifest") == RecordPath("dev", "e", "manifest")
    for name in ("/peagle-deploy/dev/e/gates", "/other/dev/e/manifest", "/peagle-deploy/dev/e"):
        assert RecordPath.parse(name) is None


def test_the_cli_says_one_line_for_a_record_it_cannot_trust(
    ssm: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """An experiment record from a newer peagle-deploy: exit 1, one line, no traceback."""
    name = "/peagle-deploy/dev/peagle-gpt-oss-20b-dev/experiment"
    _put(ssm, name, json.dumps({**_envelope("experiment"), "schema_version": 3}))
    argv = ["experiment", "status", "peagle-gpt-oss-20b-dev", "--stage", "dev"]
    assert main([*argv, "--region", REGION]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert err.startswith(f"error: {name} has schema_version 3")
