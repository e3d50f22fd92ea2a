"""The model custom resource's handler, executed as Lambda would execute it.

The stack is synthesized (the session's `stage_synth`), the custom resource's properties
are taken from the template, the handler is loaded from the asset directory CDK staged
for the Lambda function, and it is called with CloudFormation Create / Update / Delete
events against moto (in-process). One test runs the asset in a separate interpreter that
sees nothing but the asset and the standard library, against a moto server, to prove
the bundled botocore is complete and is the one used.

moto stand-in fix (named, small): moto 5.2's CreateModel drops EnableNetworkIsolation
(DescribeModel always says false); `moto_sagemaker` records it, so that adopting an
existing identical model can be tested with the real request.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import botocore.session
import pytest
from cdk_helpers import ROLE_PLACEHOLDER, Synthesized
from model_provider_kit import (
    ASSUME_ROLE_MESSAGE,
    FakeContext,
    event,
    fail_first,
    framework_asset,
    handler_asset,
    load_handler,
    model_properties,
    run_framework,
)
from moto import mock_aws

from infra import provider_bundle
from infra.model_provider import handler as source_handler
from infra.model_provider.handler import PROPERTY
from peagle_deploy.errors import PeagleError

pytestmark = pytest.mark.xdist_group(name="cdk")

STACK = "PeagleEndpoint-dev"
REGION = "us-east-1"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture
def moto_sagemaker(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from moto.sagemaker.responses import SageMakerResponse

    original = SageMakerResponse.create_model

    def create_model(self: Any) -> Any:
        result = original(self)
        model = self.sagemaker_backend._models[self._get_param("ModelName")]
        model.enable_network_isolation = bool(self._get_param("EnableNetworkIsolation", False))
        return result

    monkeypatch.setattr(SageMakerResponse, "create_model", create_model)
    with mock_aws():
        yield


@pytest.fixture
def props(stage_synth: Synthesized) -> dict[str, Any]:
    return model_properties(stage_synth, STACK, ROLE_PLACEHOLDER)


@pytest.fixture
def lambda_handler(
    stage_synth: Synthesized, monkeypatch: pytest.MonkeyPatch
) -> tuple[ModuleType, list[float]]:
    """The asset's handler, with its waits recorded instead of slept."""
    module = load_handler(handler_asset(stage_synth, STACK))
    waits: list[float] = []
    monkeypatch.setattr(module, "SLEEP", waits.append)
    return module, waits


def with_failures(
    module: ModuleType, monkeypatch: pytest.MonkeyPatch, count: int, message: str
) -> list[dict[str, Any]]:
    """Make the handler's client fail its first `count` CreateModel calls with
    ValidationException `message`; returns the params of every CreateModel it sends."""
    requests: list[dict[str, Any]] = []
    original = module.sagemaker_client

    def client() -> Any:
        c = original()
        fail_first(c, count, "ValidationException", message, requests)
        return c

    monkeypatch.setattr(module, "sagemaker_client", client)
    return requests


def sagemaker() -> Any:
    return botocore.session.get_session().create_client("sagemaker", region_name=REGION)


def expected_request(stage_synth: Synthesized) -> dict[str, Any]:
    request = dict(stage_synth.stacks[STACK].plan.create_model)
    request["ExecutionRoleArn"] = ROLE_PLACEHOLDER
    return request


# --- Create --------------------------------------------------------------------------


def test_create_retries_two_assume_role_failures_then_creates_the_planned_model(
    moto_sagemaker: None,
    stage_synth: Synthesized,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module, waits = lambda_handler
    requests = with_failures(module, monkeypatch, 2, ASSUME_ROLE_MESSAGE)
    result = module.on_event(event("Create", props), FakeContext())

    plan = stage_synth.stacks[STACK].plan
    assert result["PhysicalResourceId"] == plan.model_name
    assert result["Data"]["ModelName"] == plan.model_name
    assert result["Data"]["ModelArn"].endswith(f":model/{plan.model_name}")
    assert waits == [2.0, 4.0]  # the first two delays of the schedule
    assert len(requests) == 3 and all(r == requests[0] for r in requests)
    assert requests[0] == expected_request(stage_synth)  # exactly the plan, role swapped
    described = sagemaker().describe_model(ModelName=plan.model_name)
    created = requests[0]["PrimaryContainer"]
    assert (
        described["PrimaryContainer"]["AdditionalModelDataSources"]
        == (created["AdditionalModelDataSources"])
    )
    assert described["ExecutionRoleArn"] == ROLE_PLACEHOLDER


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("ValidationException", "Could not access model data at s3://b/m/. Please ensure ..."),
        ("ValidationException", "The role 'arn:...' does not have BatchGetImage permission"),
        (
            "AccessDeniedException",
            "User: arn:aws:sts::123456789012:assumed-role/p/x is not authorized to perform: "
            "sagemaker:CreateModel on resource: arn:aws:sagemaker:us-east-1:1:model/m",
        ),
    ],
)
@pytest.mark.usefixtures("moto_sagemaker")
def test_every_propagation_error_is_retried(
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
    monkeypatch: pytest.MonkeyPatch,
    code: str,
    message: str,
) -> None:
    module, waits = lambda_handler
    requests: list[dict[str, Any]] = []
    original = module.sagemaker_client

    def client() -> Any:
        c = original()
        fail_first(c, 1, code, message, requests)
        return c

    monkeypatch.setattr(module, "sagemaker_client", client)
    result = module.on_event(event("Create", props), FakeContext())
    assert result["PhysicalResourceId"] == json.loads(props["CreateModel"])["ModelName"]
    assert waits == [2.0] and len(requests) == 2


def test_a_retried_create_adopts_the_identical_model(
    moto_sagemaker: None,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
) -> None:
    module, waits = lambda_handler
    first = module.on_event(event("Create", props), FakeContext())
    again = module.on_event(event("Create", props), FakeContext())
    assert again == first
    assert waits == []


def test_an_existing_model_that_differs_is_an_error(
    moto_sagemaker: None,
    stage_synth: Synthesized,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
) -> None:
    module, _ = lambda_handler
    other = expected_request(stage_synth)
    other["PrimaryContainer"] = {**other["PrimaryContainer"], "Image": "other:1"}
    sagemaker().create_model(**other)
    with pytest.raises(RuntimeError) as e:
        module.on_event(event("Create", props), FakeContext())
    assert "already exists with a different PrimaryContainer.Image" in str(e.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        # a variable the request does not set: compared whole, not "what the request sets"
        (
            lambda r: r["PrimaryContainer"]["Environment"].update(EXTRA="1"),
            "PrimaryContainer.Environment.EXTRA",
        ),
        # never filled by SageMaker: must be absent when the request has none
        (
            lambda r: r.update(
                VpcConfig={"Subnets": ["subnet-0a1b2c3d"], "SecurityGroupIds": ["sg-0a1b2c3d"]}
            ),
            "VpcConfig",
        ),
        # the stage that made it is part of its identity
        (
            lambda r: r.update(
                Tags=[t for t in r["Tags"] if t["Key"] != "peagle:stage"]
                + [{"Key": "peagle:stage", "Value": "prod"}]
            ),
            "Tags.peagle:stage",
        ),
    ],
    ids=["an extra variable", "a vpc", "another stage"],
)
def test_an_existing_model_is_compared_as_the_sdk_compares_it(
    moto_sagemaker: None,
    *,
    stage_synth: Synthesized,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
    change: Any,
    field: str,
) -> None:
    """The handler's adoption is `peagle_deploy.adoption` (bundled), the SDK's rule."""
    module, _ = lambda_handler
    theirs = expected_request(stage_synth)
    theirs["PrimaryContainer"] = {
        **theirs["PrimaryContainer"],
        "Environment": dict(theirs["PrimaryContainer"]["Environment"]),
    }
    change(theirs)
    sagemaker().create_model(**theirs)
    with pytest.raises(RuntimeError) as e:
        module.on_event(event("Create", props), FakeContext())
    assert f"already exists with a different {field};" in str(e.value)


def test_a_secret_value_past_the_environment_limit_fails_before_create_model(
    moto_sagemaker: None,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """CreateModel's 1024-byte limit on one value, checked once the value is read (the
    SDK's check, shared): one line naming the variable, no CreateModel, no value."""
    value = "v" * 1025
    sm = botocore.session.get_session().create_client("secretsmanager", region_name=REGION)
    arn = sm.create_secret(Name="long", SecretString=value)["ARN"]
    module, _ = lambda_handler
    requests = with_failures(module, monkeypatch, 0, "")
    with pytest.raises(RuntimeError) as e:
        module.on_event(
            event("Create", {**props, "Secrets": json.dumps({"HF_TOKEN": arn})}), FakeContext()
        )
    message = str(e.value)
    assert message.startswith("secrets.HF_TOKEN: the secret value of HF_TOKEN is longer than")
    assert requests == [] and "\n" not in message
    out, err = capfd.readouterr()
    assert value not in message + out + err


def test_retries_stop_at_the_budget_with_the_last_message(
    moto_sagemaker: None,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module, waits = lambda_handler
    requests = with_failures(module, monkeypatch, 1000, ASSUME_ROLE_MESSAGE)
    with pytest.raises(RuntimeError) as e:
        module.on_event(event("Create", props), FakeContext())
    assert waits == list(module.RETRY_DELAYS_S)
    assert sum(waits) <= module.RETRY_BUDGET_S
    assert len(requests) == len(waits) + 1
    message = str(e.value)
    assert f"after {len(requests)} attempts" in message and "Could not assume role" in message
    assert "\n" not in message


def test_retries_stop_before_the_lambda_timeout(
    moto_sagemaker: None,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module, waits = lambda_handler
    with_failures(module, monkeypatch, 1000, "Could not access model data at s3://b/k.")
    context = FakeContext(remaining_ms=int((module.CALL_RESERVE_S + 3) * 1000))
    with pytest.raises(RuntimeError, match="Could not access model data"):
        module.on_event(event("Create", props), context)
    assert waits == [2.0]  # a 4 s wait would eat into the reserve for the last call


def test_other_errors_fail_at_once(
    moto_sagemaker: None,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module, waits = lambda_handler
    with_failures(module, monkeypatch, 1, "1 validation error detected: Value 'x' at 'image'")
    with pytest.raises(RuntimeError, match="ValidationException: 1 validation error"):
        module.on_event(event("Create", props), FakeContext())
    assert waits == []


def test_the_handler_never_writes_the_model_environment_to_its_log(
    moto_sagemaker: None,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The Lambda's log is readable more widely than the model; env values stay out of it
    on every path: retry, create, a refused differing model, update, delete."""
    secret = "hf_" + "Q" * 34
    request = json.loads(props[PROPERTY])
    request["PrimaryContainer"]["Environment"]["HF_TOKEN"] = secret
    with_secret = {**props, PROPERTY: json.dumps(request)}
    module, _ = lambda_handler
    with_failures(module, monkeypatch, 1, ASSUME_ROLE_MESSAGE)
    created = module.on_event(event("Create", with_secret), FakeContext())
    request["PrimaryContainer"]["Environment"]["HF_TOKEN"] = secret[::-1]
    with pytest.raises(RuntimeError) as refused:
        module.on_event(event("Create", {**props, PROPERTY: json.dumps(request)}), FakeContext())
    module.on_event(
        event("Update", with_secret, created["PhysicalResourceId"])
        | {"OldResourceProperties": with_secret},
        FakeContext(),
    )
    module.on_event(event("Delete", with_secret, created["PhysicalResourceId"]), FakeContext())
    out, err = capfd.readouterr()
    logged = out + err + str(refused.value)
    assert '"peagle_model_provider": "retry"' in out and '"peagle_model_provider": "deleted"' in out
    assert secret not in logged and secret[::-1] not in logged


def test_the_provider_framework_logs_the_whole_event(
    stage_synth: Synthesized, props: dict[str, Any], tmp_path: Path
) -> None:
    """Why the custom resource's properties must hold no secret at all: CDK's Provider
    framework (aws-cdk-lib 2.275, framework.js, which the project does not control) logs
    the whole CloudFormation event, ResourceProperties and OldResourceProperties
    included, before it calls the handler. Run as synthesized (cdk.out's asset), it
    prints the CreateModel request, model environment included, into the provider's log
    group; on an Update the old request too."""
    asset = framework_asset(stage_synth, STACK)
    marker = "peagle-framework-log-probe-7f3a"
    request = json.loads(props[PROPERTY])
    request["PrimaryContainer"]["Environment"]["PEAGLE_PROBE"] = marker
    probed = {**props, PROPERTY: json.dumps(request)}
    name = request["ModelName"]
    update = event("Update", probed, name) | {"OldResourceProperties": probed}
    logged = run_framework(asset, update, {"PhysicalResourceId": name}, tmp_path)
    assert "[provider-framework] onEventHandler" in logged
    # the property is logged as JSON text inside the JSON of the event: quotes escaped
    assert logged.count(marker) >= 2, logged[:2000]
    assert '\\"ExecutionRoleArn\\"' in logged


def test_secrets_are_read_at_create_and_only_their_arns_are_in_the_event(
    moto_sagemaker: None,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Secrets by reference: the custom resource's properties (which the framework logs)
    carry ARNs; the handler reads the values just before CreateModel and puts them in the
    model's environment, where DescribeModel shows them (that is SageMaker's only place
    for them). Its own log and errors never do."""
    token = "hf_" + "S" * 34
    sm = botocore.session.get_session().create_client("secretsmanager", region_name=REGION)
    plain = sm.create_secret(Name="hf-token", SecretString=token)["ARN"]
    keyed = sm.create_secret(Name="llm", SecretString=json.dumps({"api_key": "k3y-" + "z" * 20}))[
        "ARN"
    ]
    refs = {"HF_TOKEN": plain, "SM_VLLM_API_KEY": f"{keyed}:api_key"}
    with_refs = {**props, "Secrets": json.dumps(refs)}
    assert token not in json.dumps(event("Create", with_refs))
    module, _ = lambda_handler
    created = module.on_event(event("Create", with_refs), FakeContext())
    env = sagemaker().describe_model(ModelName=created["PhysicalResourceId"])["PrimaryContainer"][
        "Environment"
    ]
    assert env["HF_TOKEN"] == token and env["SM_VLLM_API_KEY"] == "k3y-" + "z" * 20
    # a retried Create adopts the same model (values compared after reading them)
    again = module.on_event(event("Create", with_refs), FakeContext())
    assert again["PhysicalResourceId"] == created["PhysicalResourceId"]
    # a reference to a missing key fails naming the variable, never a value
    bad = {**props, "Secrets": json.dumps({"HF_TOKEN": f"{plain}:nokey"})}
    with pytest.raises(RuntimeError, match="secret of HF_TOKEN is not a JSON object"):
        module.on_event(event("Create", bad), FakeContext())
    changed = {**with_refs, "Secrets": json.dumps({"HF_TOKEN": plain})}
    with pytest.raises(RuntimeError, match="Secrets changed without a new model name"):
        module.on_event(
            event("Update", changed, created["PhysicalResourceId"])
            | {"OldResourceProperties": with_refs},
            FakeContext(),
        )
    out, err = capfd.readouterr()
    assert token not in out + err and "k3y-" not in out + err


# --- Update and Delete --------------------------------------------------------------------


def test_update_changes_only_tags(
    moto_sagemaker: None,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
) -> None:
    module, _ = lambda_handler
    name = module.on_event(event("Create", props), FakeContext())["PhysicalResourceId"]
    request = json.loads(props["CreateModel"])
    retagged = {
        **props,
        "CreateModel": json.dumps({**request, "Tags": [{"Key": "k", "Value": "v"}]}),
    }
    update = event("Update", retagged, physical_id=name)
    update["OldResourceProperties"] = props
    result = module.on_event(update, FakeContext())
    assert result["PhysicalResourceId"] == name
    tags = sagemaker().list_tags(ResourceArn=result["Data"]["ModelArn"])["Tags"]
    assert {"Key": "k", "Value": "v"} in tags

    changed = json.loads(props["CreateModel"])
    changed["PrimaryContainer"]["Environment"]["SM_VLLM_MAX_MODEL_LEN"] = "1024"
    bad = event("Update", {**props, "CreateModel": json.dumps(changed)}, physical_id=name)
    bad["OldResourceProperties"] = props
    with pytest.raises(RuntimeError, match="PrimaryContainer changed without a new model name"):
        module.on_event(bad, FakeContext())


def test_delete_removes_the_model_and_a_second_delete_succeeds(
    moto_sagemaker: None,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
) -> None:
    module, _ = lambda_handler
    name = module.on_event(event("Create", props), FakeContext())["PhysicalResourceId"]
    for _ in range(2):
        result = module.on_event(event("Delete", props, physical_id=name), FakeContext())
        assert result == {"PhysicalResourceId": name}  # the framework requires the same id
        assert sagemaker().list_models()["Models"] == []


def test_delete_after_a_failed_create_succeeds_without_a_call(
    moto_sagemaker: None,
    props: dict[str, Any],
    lambda_handler: tuple[ModuleType, list[float]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module, _ = lambda_handler
    marker = "AWSCDK::CustomResourceProviderFramework::CREATE_FAILED"
    made: list[Any] = []
    original = module.sagemaker_client

    def client() -> Any:
        c = original()
        c.meta.events.register("before-call", lambda **kw: made.append(kw["model"].name))
        return c

    monkeypatch.setattr(module, "sagemaker_client", client)
    result = module.on_event(event("Delete", props, physical_id=marker), FakeContext())
    assert result == {"PhysicalResourceId": marker}
    assert made == []


# --- the asset's own botocore ------------------------------------------------------------


def test_the_asset_carries_a_botocore_that_knows_the_drafter(stage_synth: Synthesized) -> None:
    asset = handler_asset(stage_synth, STACK)
    manifest = json.loads((asset / provider_bundle.MANIFEST).read_text())
    assert manifest["distributions"] == provider_bundle.bundled_versions()
    assert (asset / "handler.py").read_bytes() == Path(source_handler.__file__).read_bytes()
    data = asset / "botocore" / "data"
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["sagemaker", "secretsmanager"]
    service = next((data / "sagemaker").glob("*/service-2.json*"))
    assert service.exists()


def test_the_shared_modules_need_only_the_standard_library_and_each_other() -> None:
    """What the asset carries of the package runs alone: every import of a shared module
    is the standard library's or another shared module (so the SDK's comparison, limits
    and masking are the handler's, not copies)."""
    shared = {m.removesuffix(".py").replace("/", ".") for m in provider_bundle.SHARED_MODULES}
    shared |= {name.removesuffix(".__init__") for name in shared}
    for module in provider_bundle.SHARED_MODULES:
        tree = ast.parse((provider_bundle.PACKAGE_ROOT / module).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert name in shared or top in sys.stdlib_module_names | {"__future__"}, (
                    f"{module} imports {name}"
                )
    handler = ast.parse((Path(source_handler.__file__)).read_text())
    imported = {n.module for n in ast.walk(handler) if isinstance(n, ast.ImportFrom) and n.module}
    assert {m for m in imported if m.startswith("peagle_deploy")} <= shared


def test_the_asset_botocore_is_the_locked_wheels_not_the_synth_machines(
    stage_synth: Synthesized,
) -> None:
    """The asset carries exactly the wheels infra/model_provider/requirements.lock pins
    (version and sha256), whatever botocore the synthesizing environment has installed."""
    asset = handler_asset(stage_synth, STACK)
    manifest = json.loads((asset / provider_bundle.MANIFEST).read_text())
    pins = {p.name: p for p in provider_bundle.pins()}
    assert set(pins) == {"botocore", "jmespath", "python-dateutil", "six", "urllib3"}
    assert set(manifest["wheels"]) == set(pins)
    for name, wheel in manifest["wheels"].items():
        assert wheel["sha256"] in pins[name].hashes, name
        assert wheel["file"].lower().startswith(pins[name].wheel_prefix), name
    version = re.search(
        r"^__version__ = '([^']+)'", (asset / "botocore" / "__init__.py").read_text(), re.M
    )
    assert version is not None and version[1] == pins["botocore"].version


def test_a_cached_wheel_that_differs_from_the_lock_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache file with the right name and other content (tampered, or another build) is
    not a locked wheel: staging downloads with --require-hashes instead, and offline it
    stops with one line."""
    pin = next(p for p in provider_bundle.pins() if p.name == "six")
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"six=={pin.version} " + " ".join(f"--hash=sha256:{h}" for h in pin.hashes))
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / f"six-{pin.version}-py2.py3-none-any.whl").write_bytes(b"PK not the wheel")
    monkeypatch.setenv("PEAGLE_WHEEL_CACHE", str(cache))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    with pytest.raises(PeagleError, match="could not download the model provider's pinned"):
        provider_bundle.stage(tmp_path / "out", lock=lock)
    assert not list((tmp_path / "out").glob("peagle-model-provider-*"))


def test_the_lock_is_exact_and_hashed(tmp_path: Path) -> None:
    loose = tmp_path / "loose.lock"
    loose.write_text("botocore>=1.44\n")
    with pytest.raises(PeagleError, match="not an exact, hashed pin"):
        provider_bundle.pins(loose)
    unhashed = tmp_path / "unhashed.lock"
    unhashed.write_text("botocore==1.44.5\n")
    with pytest.raises(PeagleError, match="not an exact, hashed pin"):
        provider_bundle.pins(unhashed)


def test_the_asset_runs_alone_against_a_moto_server(
    stage_synth: Synthesized, props: dict[str, Any], tmp_path: Path
) -> None:
    """A fresh interpreter that sees only the asset and the standard library (`-I -S`,
    as Lambda puts the function's directory first): Create, then Delete twice."""
    from moto.server import ThreadedMotoServer

    asset = handler_asset(stage_synth, STACK)
    runner = tmp_path / "runner.py"
    runner.write_text(
        "import json, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import botocore, handler\n"
        "assert botocore.__file__.startswith(sys.argv[1]), botocore.__file__\n"
        "events = json.loads(open(sys.argv[2]).read())\n"
        "out = [handler.on_event(e, None) for e in events]\n"
        "print(json.dumps({'botocore': botocore.__version__, 'results': out}))\n"
    )
    name = json.loads(props["CreateModel"])["ModelName"]
    events = [
        event("Create", props),
        event("Delete", props, physical_id=name),
        event("Delete", props, physical_id=name),
    ]
    (tmp_path / "events.json").write_text(json.dumps(events))
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "PATH": os.environ.get("PATH", ""),
        }
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(runner), str(asset), str(tmp_path / "events.json")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    output = json.loads(done.stdout.splitlines()[-1])
    assert output["botocore"] == provider_bundle.bundled_versions()["botocore"]
    create, *deletes = output["results"]
    assert create["PhysicalResourceId"] == name
    assert deletes == [{"PhysicalResourceId": name}] * 2


def test_a_botocore_without_the_field_fails_with_one_line() -> None:
    class Shape:
        members: dict[str, Any] = {"Image": None, "Environment": None}

    class Model:
        def shape_for(self, name: str) -> Shape:
            assert name == "ContainerDefinition"
            return Shape()

    class OldSession:
        def get_service_model(self, service: str) -> Model:
            return Model()

    with pytest.raises(RuntimeError) as e:
        source_handler.require_additional_model_data_sources(OldSession())  # type: ignore[arg-type]
    assert "AdditionalModelDataSources" in str(e.value) and "\n" not in str(e.value)
    source_handler.require_additional_model_data_sources(botocore.session.get_session())


def test_the_retry_schedule() -> None:
    """Doubling from 2 s, capped at 60 s, within the 300 s budget: 242 s of waiting over
    at most 9 attempts, inside the 480 s Lambda timeout with the 90 s reserve."""
    h = source_handler
    assert h.RETRY_DELAYS_S == (2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0)
    assert sum(h.RETRY_DELAYS_S) <= h.RETRY_BUDGET_S
    assert h.LAMBDA_TIMEOUT_S >= h.RETRY_BUDGET_S + h.CALL_RESERVE_S
    assert h.LAMBDA_TIMEOUT_S < 15 * 60  # the Provider framework's function waits 15 min
