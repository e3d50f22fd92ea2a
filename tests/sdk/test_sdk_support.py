"""Client factory (retries, endpoint URLs from the environment) and the SSM manifest."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3
import pytest
from moto import mock_aws
from peagle_local.emulator import LocalAWS
from sdk_testkit import MODEL, REGION, ROLE, AwsEnv

from peagle_deploy.aws import make_client, retry_settings
from peagle_deploy.errors import PeagleError
from peagle_deploy.sdk import (
    DeploymentManifest,
    ManifestError,
    deploy_peagle,
    list_endpoints,
    manifest_parameter_name,
    plan_for,
    read_manifest,
    write_manifest,
)


def test_retry_settings_default_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PEAGLE_AWS_RETRY_MODE", raising=False)
    monkeypatch.delenv("PEAGLE_AWS_MAX_ATTEMPTS", raising=False)
    assert retry_settings() == {"mode": "adaptive", "total_max_attempts": 8}
    client = make_client("sagemaker", region="eu-west-1")
    assert client.meta.config.retries == {"mode": "adaptive", "total_max_attempts": 8}
    monkeypatch.setenv("PEAGLE_AWS_RETRY_MODE", "standard")
    monkeypatch.setenv("PEAGLE_AWS_MAX_ATTEMPTS", "3")
    assert retry_settings() == {"mode": "standard", "total_max_attempts": 3}
    monkeypatch.setenv("PEAGLE_AWS_RETRY_MODE", "aggressive")
    with pytest.raises(PeagleError, match="adaptive"):
        retry_settings()
    monkeypatch.setenv("PEAGLE_AWS_RETRY_MODE", "standard")
    monkeypatch.setenv("PEAGLE_AWS_MAX_ATTEMPTS", "zero")
    with pytest.raises(PeagleError, match="PEAGLE_AWS_MAX_ATTEMPTS"):
        retry_settings()


def test_service_specific_endpoint_urls_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only AWS_ENDPOINT_URL_SAGEMAKER(_RUNTIME) set: boto3 routes those services there."""
    with LocalAWS() as local:
        for var in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", local.credentials.access_key_id)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", local.credentials.secret_access_key)
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", local.endpoint_url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", local.endpoint_url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_SSM", local.endpoint_url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH_LOGS", local.endpoint_url)
        assert make_client("sagemaker", region=REGION).meta.endpoint_url == local.endpoint_url
        assert make_client("ssm", region=REGION).meta.endpoint_url == local.endpoint_url
        endpoint = deploy_peagle(MODEL, role_arn=ROLE, region=REGION, progress=False)
        assert endpoint.status() == "InService"
        assert endpoint.chat([{"role": "user", "content": "hi"}], max_tokens=3).text
        assert [e.name for e in list_endpoints(region=REGION)] == [endpoint.endpoint_name]


def _manifest() -> DeploymentManifest:
    plan = plan_for(MODEL, role_arn=ROLE, region=REGION, stage="staging")
    return DeploymentManifest.from_plan(plan, deployed_by="test", git_commit="abc123")


def test_manifest_round_trip_and_errors() -> None:
    with mock_aws():
        ssm = boto3.client("ssm", region_name=REGION)
        manifest = _manifest()
        name = write_manifest(
            manifest, ssm_client=ssm, tags=[{"Key": "peagle:managed", "Value": "true"}]
        )
        assert name == manifest_parameter_name("staging", manifest.endpoint_name)
        assert name == f"/peagle-deploy/staging/{manifest.endpoint_name}/manifest"
        back = read_manifest("staging", manifest.endpoint_name, ssm_client=ssm)
        assert back == manifest
        # the spec's env may hold secrets: stored encrypted, never as a plain String
        stored = ssm.get_parameter(Name=name)["Parameter"]
        assert stored["Type"] == "SecureString"
        assert stored["Value"] != manifest.model_dump_json()
        assert back is not None and back.git_commit == "abc123"
        tags = ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=name)["TagList"]
        assert {"Key": "peagle:managed", "Value": "true"} in tags
        assert read_manifest("prod", manifest.endpoint_name, ssm_client=ssm) is None
        ssm.put_parameter(Name=name, Value="{not json", Type="String", Overwrite=True)
        with pytest.raises(ManifestError, match="not JSON"):
            read_manifest("staging", manifest.endpoint_name, ssm_client=ssm)
        doc = json.loads(manifest.model_dump_json())
        doc["schema_version"] = 99
        ssm.put_parameter(Name=name, Value=json.dumps(doc), Type="String", Overwrite=True)
        with pytest.raises(ManifestError, match="schema_version 99"):
            read_manifest("staging", manifest.endpoint_name, ssm_client=ssm)
        doc["schema_version"] = 1
        del doc["content_hash"]
        ssm.put_parameter(Name=name, Value=json.dumps(doc), Type="String", Overwrite=True)
        with pytest.raises(ManifestError, match="content_hash"):
            read_manifest("staging", manifest.endpoint_name, ssm_client=ssm)


class _NoTierDowngrade:
    """moto's SSM, refusing Advanced -> Standard as SSM does ("can't revert")."""

    def __init__(self, ssm: object) -> None:
        self.ssm = ssm
        self.advanced: set[str] = set()
        self.tiers: list[str] = []

    def put_parameter(self, **kwargs: object) -> object:
        from botocore.exceptions import ClientError

        name, tier = str(kwargs["Name"]), str(kwargs.get("Tier", "Standard"))
        self.tiers.append(tier)
        if tier == "Standard" and name in self.advanced:
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": "can't downgrade"}},
                "PutParameter",
            )
        if tier == "Advanced":
            self.advanced.add(name)
        return self.ssm.put_parameter(**kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.ssm, name)


def test_manifest_shrinking_below_4kb_stays_advanced() -> None:
    """A promotion's large manifest made the parameter Advanced; a later small one is
    still written (as Advanced), not refused and left stale."""
    with mock_aws():
        ssm = _NoTierDowngrade(boto3.client("ssm", region_name=REGION))
        manifest = _manifest()
        big = manifest.model_copy(
            update={"gate_results": [{"kind": "level", "note": "x" * 200} for _ in range(25)]}
        )
        assert len(big.model_dump_json().encode()) > 4096
        write_manifest(big, ssm_client=ssm)
        write_manifest(manifest, ssm_client=ssm)
        assert ssm.tiers == ["Advanced", "Standard", "Advanced"]
        assert read_manifest("staging", manifest.endpoint_name, ssm_client=ssm) == manifest


def test_manifest_records_gate_results_for_promotion() -> None:
    manifest = _manifest().model_copy(
        update={
            "promoted_from": "dev/peagle-x-dev",
            "gate_results": [{"gate": "p99_ttft_ms", "passed": True, "value": 180.0}],
        }
    )
    again = DeploymentManifest.model_validate_json(manifest.model_dump_json())
    assert again.gate_results[0]["passed"] is True
    assert again.deployed_at.tzinfo is not None
    assert again.deployed_at <= datetime.now(UTC)


def test_noop_rewrites_a_missing_or_corrupt_manifest(aws: AwsEnv) -> None:
    first = deploy_peagle(MODEL, role_arn=ROLE, boto_session=aws.session, progress=False)
    assert first.deployment is not None
    name = first.deployment.manifest_parameter
    ssm = aws.client("ssm")
    ssm.put_parameter(Name=name, Value="garbage", Type="String", Overwrite=True)
    again = deploy_peagle(MODEL, role_arn=ROLE, boto_session=aws.session, progress=False)
    assert again.deployment is not None and again.deployment.action == "noop"
    manifest = read_manifest("dev", first.endpoint_name, ssm_client=ssm)
    assert manifest is not None and manifest.content_hash == first.deployment.content_hash
