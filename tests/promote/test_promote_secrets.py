"""`secrets` belong to a stage (issue 29): a promotion never carries the source stage's
secret ARNs into the target.

The target's plan is built as `peagle promote` builds it (`plan_target`), from a source
manifest and the target stage's settings; the target's AWS state is given (no manifest,
no endpoint, or the manifest of an earlier deployment), so only the rule is judged.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from peagle_deploy.errors import InputError
from peagle_deploy.plan import build_plan
from peagle_deploy.promote import runner, store
from peagle_deploy.promote.runner import PromoteOptions, Source, StageState, plan_target
from peagle_deploy.sdk import DeploymentManifest
from peagle_deploy.spec import load_spec

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/peagle-promote-test"


def arn(name: str) -> str:
    return f"arn:aws:secretsmanager:{REGION}:123456789012:secret:{name}-AbCdEf"


def manifest(stage: str, **overrides: Any) -> DeploymentManifest:
    spec = load_spec(
        model="gpt-oss-20b", region=REGION, stage=stage, execution_role_arn=ROLE, **overrides
    )
    return DeploymentManifest.from_plan(build_plan(spec), deployed_by="test")


def source(**overrides: Any) -> Source:
    m = manifest("dev", **overrides)
    state = StageState(stage="dev", endpoint_name=m.endpoint_name, status="InService")
    return Source(state, m)


def target(
    monkeypatch: pytest.MonkeyPatch,
    src: Source,
    *,
    target_manifest: DeploymentManifest | None = None,
    **options: Any,
) -> Any:
    """The target plan `peagle promote --from dev --to staging` builds."""
    monkeypatch.setattr(store, "read_optional_manifest", lambda *_: target_manifest)
    monkeypatch.setattr(runner, "describe_endpoint_or_none", lambda *_: None)
    opts = PromoteOptions(source_stage="dev", target_stage="staging", region=REGION, **options)
    return plan_target(SimpleNamespace(sagemaker=None), opts, src)  # type: ignore[arg-type]


def test_the_source_stages_secret_is_never_carried_into_the_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = source(secrets={"HF_TOKEN": arn("dev/hf")})
    with pytest.raises(InputError) as err:
        target(monkeypatch, src)
    text = str(err.value)
    assert err.value.field == "secrets.HF_TOKEN"
    assert arn("dev/hf") in text and "--secret HF_TOKEN=" in text and "\n" not in text


def test_the_target_binds_its_own_secret_from_its_stage_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stage_file = tmp_path / "staging.yaml"
    stage_file.write_text(
        f"model: gpt-oss-20b\nregion: {REGION}\nsecrets:\n  HF_TOKEN: {arn('staging/hf')}\n"
    )
    src = source(secrets={"HF_TOKEN": arn("dev/hf")})
    plan = target(monkeypatch, src, stage_file=stage_file).plan
    assert plan.secret_refs == {"HF_TOKEN": arn("staging/hf")}


def test_a_stage_file_without_the_binding_is_refused_naming_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stage_file = tmp_path / "staging.yaml"
    stage_file.write_text(f"model: gpt-oss-20b\nregion: {REGION}\n")
    src = source(secrets={"HF_TOKEN": arn("dev/hf")})
    with pytest.raises(InputError) as err:
        target(monkeypatch, src, stage_file=stage_file)
    assert err.value.field == "secrets.HF_TOKEN" and str(stage_file) in str(err.value)


def test_the_targets_manifest_binds_it_and_secret_rebinds_explicitly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = source(secrets={"HF_TOKEN": arn("dev/hf")})
    earlier = manifest("staging", secrets={"HF_TOKEN": arn("staging/hf")})
    plan = target(monkeypatch, src, target_manifest=earlier).plan
    assert plan.secret_refs == {"HF_TOKEN": arn("staging/hf")}
    rebound = target(
        monkeypatch, src, target_manifest=earlier, secrets={"HF_TOKEN": arn("staging/hf2")}
    ).plan
    assert rebound.secret_refs == {"HF_TOKEN": arn("staging/hf2")}
    # a first promotion with nothing recorded: the explicit binding alone
    first = target(monkeypatch, src, secrets={"HF_TOKEN": arn("staging/hf")}).plan
    assert first.secret_refs == {"HF_TOKEN": arn("staging/hf")}


def test_a_source_without_secrets_promotes_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = target(monkeypatch, source()).plan
    assert plan.secret_refs == {}


def test_a_bad_explicit_binding_is_refused_before_any_aws_call() -> None:
    from peagle_deploy.promote.gates import StageGates
    from peagle_deploy.promote.runner import check_inputs

    opts = PromoteOptions(
        source_stage="dev", target_stage="staging", secrets={"HF_TOKEN": "hf_not-an-arn"}
    )
    with pytest.raises(InputError) as err:
        check_inputs(opts, StageGates())
    assert err.value.field == "--secret.HF_TOKEN"
