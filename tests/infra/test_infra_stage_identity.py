"""One stage identity that cannot collide (issue 29, High), decided by an outside IAM
evaluator (@cloud-copilot/iam-simulate) on synthesized templates over generated names.

The finding: derived model and config names kept the first 53 characters of the endpoint
name, and every grant on them was `<head>-m????????` / `<head>-c????????`, so stages whose
endpoint names share 53 characters (a 47-character `custom.name` is enough) got the same
grants: dev's CI role could delete prod's models, read their environment (resolved
secrets) and create configs of prod's next names. Here each generated stage map is
synthesized (PeagleCiRoles, and for the longest case the endpoint stacks with their model
provider and execution roles), and every role is asked about every other stage's current
and next names.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from cdk_helpers import EDGE_ACCOUNT, ROOT, cdk_context, synthesize_once
from iam_oracle import ACCOUNT, Ask, TemplateRoles, run

from infra.ci_stack import CiRolesStack
from infra.github_oidc import GitHubRepo
from infra.stack import PeagleStack
from infra.stages import StageConfig
from peagle_deploy.errors import InputError
from peagle_deploy.naming import derived_name

pytestmark = [pytest.mark.xdist_group(name="cdk"), pytest.mark.slow]

STAGES = ("dev", "staging", "prod")
REGION = "us-east-1"
SOURCE = {"dev": None, "staging": "dev", "prod": "staging"}
NEXT_DIGESTS = ("ffffffff", "00000000")
"""Digests of specs not deployed yet: a stage's next model and config names."""
REGION_READS = {"sagemaker:DescribeEndpoint", "sagemaker:DescribeEndpointConfig"}
"""Read-only on every endpoint and config of the region, by design (the doctor counts the
instances the account's endpoints hold; no model environment)."""
SOURCE_READS = {
    "sagemaker:DescribeEndpoint",
    "sagemaker:DescribeEndpointConfig",
    "sagemaker:InvokeEndpoint",
    "sagemaker:InvokeEndpointWithResponseStream",
    "sagemaker:ListTags",
}
"""What a stage's role may do on the stage it is promoted from (never DescribeModel, which
shows the source's resolved environment: issue 34, Low 2)."""
ENDPOINT_ACTIONS = (
    "AddTags",
    "CreateEndpoint",
    "DeleteEndpoint",
    "DescribeEndpoint",
    "InvokeEndpoint",
    "InvokeEndpointWithResponseStream",
    "ListTags",
    "UpdateEndpoint",
    "UpdateEndpointWeightsAndCapacities",
)
MODEL_ACTIONS = ("AddTags", "CreateModel", "DeleteModel", "DescribeModel", "ListTags")
CONFIG_ACTIONS = ("AddTags", "DeleteEndpointConfig", "DescribeEndpointConfig", "ListTags")


def _generated(rng: random.Random, length: int) -> str:
    """A valid endpoint name of `length` characters."""
    chars = [rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(length)]
    for i in range(1, length - 1):
        if rng.random() < 0.15 and chars[i - 1] != "-":
            chars[i] = "-"
    return "".join(chars)


def _cases() -> dict[str, dict[str, Any]]:
    """Stage maps: stage -> spec overrides (the endpoint name, generated)."""
    rng = random.Random(29)
    shared = _generated(rng, 53).rstrip("-")
    long = _generated(rng, 62).rstrip("-")
    base = {"model": "gpt-oss-20b", "region": REGION}
    custom = {
        "model": "custom",
        "region": "eu-west-1",
        "instance_type": "ml.g7e.4xlarge",
        "custom": {
            "image_uri": f"{EDGE_ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/team/peagle-vllm:1.0",
            "model_data_uri": "s3://acme-models/qwen3/model.tar.gz",
            "drafter_uri": "s3://acme-drafters/qwen3-p-eagle/",
            "drafter_kind": "p-eagle",
            "weights_gb": 60,
            "name": "acme-" + _generated(rng, 42),  # 47 characters
        },
    }
    return {
        "Shared53": {s: {**base, "endpoint_name": f"{shared}-{s}"} for s in STAGES},
        "LastChar": {
            s: {**base, "endpoint_name": long + c} for s, c in zip(STAGES, "a7z", strict=True)
        },
        "Boundary": {
            "dev": {**base, "endpoint_name": shared[:52] + "d"},  # 53: its own head
            "staging": {**base, "endpoint_name": shared[:52] + "d1"},  # 54: cut
            "prod": {**base, "endpoint_name": shared[:52] + "d2"},
        },
        "Defaults": {s: dict(base) for s in STAGES},
        "CustomName47": {s: dict(custom) for s in STAGES},
    }


def _stages(overrides: Mapping[str, Mapping[str, Any]]) -> list[StageConfig]:
    return [
        StageConfig(name=s, spec_file=None, overrides=dict(overrides[s]), promote_from=SOURCE[s])
        for s in STAGES
    ]


@dataclass
class Names:
    """One stage's endpoint and its current and next model and config names."""

    region: str
    endpoint: str
    models: list[str]
    configs: list[str]

    def arn(self, resource: str) -> str:
        return f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:{resource}"


@dataclass
class Synth:
    templates: dict[str, dict[str, Any]]
    names: dict[str, dict[str, Names]]
    """Case -> stage -> its names."""


def _build(outdir: Path) -> Synth:
    app = cdk.App(outdir=str(outdir), context=cdk_context())
    names: dict[str, dict[str, Names]] = {}
    for case, overrides in _cases().items():
        stages = _stages(overrides)
        plans = [s.plan() for s in stages]
        CiRolesStack(
            app,
            f"Ci{case}",
            repo=GitHubRepo.parse("acme/llm-serving", "test"),
            stages=stages,
            plans=plans,
            account=ACCOUNT,
        )
        names[case] = {
            s.name: Names(
                p.region,
                p.endpoint_name,
                [p.model_name, *(derived_name(p.endpoint_name, "m", d) for d in NEXT_DIGESTS)],
                [
                    p.endpoint_config_name,
                    *(derived_name(p.endpoint_name, "c", d) for d in NEXT_DIGESTS),
                ],
            )
            for s, p in zip(stages, plans, strict=True)
        }
        if case == "Shared53":  # the endpoint stacks' own roles, on the finding's names
            for stage, plan in zip(stages, plans, strict=True):
                if stage.name != "staging":
                    pinned = StageConfig(
                        name=stage.name, spec_file=None, overrides=stage.overrides, account=ACCOUNT
                    )
                    PeagleStack(app, f"Endpoint{case}{stage.name}", stage=pinned, plan=plan)
    app.synth()
    templates = {
        path.name.removesuffix(".template.json"): json.loads(path.read_text())
        for path in outdir.glob("*.template.json")
    }
    return Synth(templates, names)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize_once("stage-identity", tmp_path_factory, _build)  # type: ignore[arg-type, return-value]


def _asks(own: Names, other: Names) -> list[Ask]:
    """Every SageMaker action a deploy role has, on `other`'s endpoint and on its current
    and next models and configs; CreateEndpointConfig of `other`'s names with a model of
    `own` (what the role may otherwise do) and of `other`."""
    asks = [
        Ask(f"sagemaker:{a}", other.arn(f"endpoint/{other.endpoint}")) for a in ENDPOINT_ACTIONS
    ]
    for model in other.models:
        asks += [Ask(f"sagemaker:{a}", other.arn(f"model/{model}")) for a in MODEL_ACTIONS]
    for config in other.configs:
        asks += [
            Ask(f"sagemaker:{a}", other.arn(f"endpoint-config/{config}")) for a in CONFIG_ACTIONS
        ]
        for model in (own.models[0], other.models[0]):
            asks.append(
                Ask(
                    "sagemaker:CreateEndpointConfig",
                    other.arn(f"endpoint-config/{config}"),
                    {"sagemaker:ModelArn": own.arn(f"model/{model}")},
                )
            )
    return asks


def _decide(roles: TemplateRoles, role_id: str, asks: Sequence[Ask]) -> list[str]:
    results = run([roles.simulation(role_id, ask) for ask in asks])
    for ask, result in zip(asks, results, strict=True):
        assert result["decision"] != "Error", (ask, result["errors"])
        assert not result["ignored"], (ask, result["ignored"])
    return [r["decision"] for r in results]


@pytest.mark.parametrize("case", list(_cases()))
def test_each_stage_role_is_denied_every_action_on_the_other_stages_names(
    synth: Synth, case: str
) -> None:
    names = synth.names[case]
    assert len({n.endpoint for n in names.values()}) == len(STAGES)
    region = next(iter(names.values())).region
    roles = TemplateRoles(synth.templates[f"Ci{case}"], region)
    for stage in STAGES:
        role_id = roles.role_id(f"Deploy{stage}Role")
        own = names[stage]
        # a positive control: the role can do its own job on its current and next names
        own_model = own.arn(f"model/{own.models[0]}")
        mine = [
            a
            for a in _asks(own, own)
            if a.context.get("sagemaker:ModelArn", own_model) == own_model
        ]
        assert set(_decide(roles, role_id, mine)) == {"Allowed"}, (case, stage)
        for other in STAGES:
            if other == stage:
                continue
            asks = _asks(own, names[other])
            wrong = []
            for ask, decision in zip(asks, _decide(roles, role_id, asks), strict=True):
                expected = ask.action in REGION_READS or (
                    SOURCE[stage] == other and ask.action in SOURCE_READS
                )
                if (decision == "Allowed") != expected:
                    wrong.append((ask.action, ask.resource.rsplit(":", 1)[-1], decision))
            assert wrong == [], f"{case}: the {stage} role on {other}'s names"


@pytest.mark.parametrize("role", ["ModelProviderRole", "ExecutionRole"])
def test_the_endpoint_stacks_roles_are_confined_to_their_own_names(synth: Synth, role: str) -> None:
    """The model provider creates, describes and deletes models of its endpoint's grant;
    on the finding's names it also matched the other stage's models."""
    names = synth.names["Shared53"]
    for stage, other in (("dev", "prod"), ("prod", "dev")):
        roles = TemplateRoles(synth.templates[f"EndpointShared53{stage}"], REGION)
        role_id = roles.role_id(role)
        if role == "ModelProviderRole":
            actions = ("CreateModel", "DeleteModel", "DescribeModel", "AddTags")
            own = [
                Ask(f"sagemaker:{a}", names[stage].arn(f"model/{m}"))
                for a in actions
                for m in names[stage].models
            ]
            theirs = [
                Ask(f"sagemaker:{a}", names[other].arn(f"model/{m}"))
                for a in actions
                for m in names[other].models
            ]
        else:

            def streams(n: Names) -> str:
                group = f"/aws/sagemaker/Endpoints/{n.endpoint}"
                return (
                    f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{group}:log-stream:AllTraffic/i-1"
                )

            own = [Ask("logs:PutLogEvents", streams(names[stage]))]
            theirs = [Ask("logs:PutLogEvents", streams(names[other]))]
        assert set(_decide(roles, role_id, own)) == {"Allowed"}, (role, stage)
        assert set(_decide(roles, role_id, theirs)) == {"ImplicitlyDenied"}, (role, stage, other)


# --- refused: two stages with one endpoint, or with overlapping grants --------------------


def _app_main(
    context: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, list[str]]:
    monkeypatch.syspath_prepend(str(ROOT))
    import app

    code = app.main(context)
    return code, capsys.readouterr().err.strip().splitlines()


def _stage_map(names: Mapping[str, str]) -> dict[str, Any]:
    return {
        stage: {"overrides": {"model": "gpt-oss-20b", "region": REGION, "endpoint_name": name}}
        for stage, name in names.items()
    }


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        (
            {"dev": "peagle-shared", "prod": "peagle-shared"},
            "stages dev and prod would both deploy endpoint 'peagle-shared'",
        ),
        (
            {"dev": "Peagle-Shared", "staging": "x-staging", "prod": "peagle-shared"},
            "stages dev and prod would both deploy endpoint 'peagle-shared'",
        ),
    ],
)
def test_synth_refuses_two_stages_with_one_endpoint_in_one_line(
    names: dict[str, str],
    problem: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    context = {
        **cdk_context(),
        "peagle:stages": _stage_map(names),
        "@aws-cdk/core:outdir": str(tmp_path),
    }
    code, err = _app_main(context, capsys, monkeypatch)
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error: peagle:stages.prod.endpoint_name: ")
    assert problem in err[0]
    assert not list(tmp_path.glob("*.template.json"))


def test_synth_refuses_two_stages_whose_grants_would_overlap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Different names, one head: a short name spelled exactly like a long name's head
    (its first 40 characters, a dash, the digest of the whole name)."""
    from peagle_deploy.naming import derived_head

    long = "peagle-" + "q" * 56
    context = {
        **cdk_context(),
        "peagle:stages": _stage_map({"dev": long, "prod": derived_head(long)}),
        "@aws-cdk/core:outdir": str(tmp_path),
    }
    code, err = _app_main(context, capsys, monkeypatch)
    assert code == 2 and len(err) == 1
    assert err[0].startswith("error: peagle:stages.prod.endpoint_name: stages dev and prod ")
    assert "would share IAM grants" in err[0]


def test_the_ci_roles_stack_refuses_them_too() -> None:
    stages = _stages(
        {s: {"model": "gpt-oss-20b", "endpoint_name": "peagle-shared"} for s in STAGES}
    )
    with pytest.raises(InputError, match="stages dev and staging would both deploy"):
        CiRolesStack(
            cdk.App(),
            "Ci",
            repo=GitHubRepo.parse("acme/llm-serving", "test"),
            stages=stages,
            plans=[s.plan() for s in stages],
            account=ACCOUNT,
        )


def test_a_cut_names_models_are_new_resources_and_a_fitting_names_keep_their_id(
    synth: Synth,
) -> None:
    """An existing stack of a long endpoint name gets new model names: CloudFormation must
    create them as new resources (the handler refuses a rename in place), so their
    logical ids carry the name's digest; names that fit keep the ids they had."""
    from peagle_deploy.naming import name_digest

    for stage in ("dev", "prod"):
        names = synth.names["Shared53"][stage]
        template = synth.templates[f"EndpointShared53{stage}"]
        (model_id,) = [
            lid for lid, r in template["Resources"].items() if r["Type"] == "Custom::PeagleModel"
        ]
        assert f"Model{name_digest(names.endpoint)}{names.models[0][-8:]}" in model_id
