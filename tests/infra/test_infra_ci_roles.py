"""PeagleCiRoles: one deploy role per stage, each confined to its stage, decided by an
outside IAM evaluator (@cloud-copilot/iam-simulate) on the synthesized template.

The finding this answers (issue 19, High): with the hand-written roles of docs/ci.md,
anyone who could run the `dev` job could update or delete the prod endpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from cdk_helpers import ROOT, cdk_context, synthesize_once
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint
from iam_oracle import ACCOUNT, Ask, TemplateRoles, run
from peagle_local.emulator.iam_policy import NamedPolicy, evaluate

from infra.ci_stack import CI_STACK_ID, CiRolesStack
from infra.github_oidc import GITHUB_OIDC_HOST, GitHubRepo, check_provider_choice
from infra.stages import STAGES_CONTEXT_KEY, stage_configs
from peagle_deploy.errors import InputError
from peagle_deploy.naming import derived_name

pytestmark = pytest.mark.xdist_group(name="cdk")

REPO = "acme/llm-serving"
REGION = "us-east-1"
STAGES = ("dev", "staging", "prod")


def _arn(resource: str, service: str = "sagemaker") -> str:
    return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{resource}"


class CiSynth:
    """The synthesized PeagleCiRoles template of cdk.json's stages (picklable)."""

    def __init__(self, template: dict[str, Any], endpoints: dict[str, str], nag: list[Any]):
        self.template = template
        self.endpoints = endpoints
        self.nag_violations = nag
        self.roles = TemplateRoles(template, REGION)

    def role(self, stage: str) -> str:
        return self.roles.role_id(f"Deploy{stage}Role")


def _build(outdir: Path) -> CiSynth:
    context = cdk_context()
    stages = stage_configs(context[STAGES_CONTEXT_KEY], ROOT)
    plans = [s.plan() for s in stages]
    app = cdk.App(outdir=str(outdir), context=context)
    CiRolesStack(
        app,
        CI_STACK_ID,
        repo=GitHubRepo.parse(REPO, "test"),
        stages=stages,
        plans=plans,
        account=ACCOUNT,
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()
    report = json.loads((outdir / "validation-report.json").read_text())
    violations = [v for plugin in report["pluginReports"] for v in plugin["violations"]]
    template = json.loads((outdir / f"{CI_STACK_ID}.template.json").read_text())
    return CiSynth(
        template, {s.name: p.endpoint_name for s, p in zip(stages, plans, strict=True)}, violations
    )


@pytest.fixture(scope="session")
def ci(tmp_path_factory: pytest.TempPathFactory) -> CiSynth:
    return synthesize_once("ci-roles", tmp_path_factory, _build)  # type: ignore[arg-type]


def _endpoint(ci: CiSynth, stage: str) -> str:
    return _arn(f"endpoint/{ci.endpoints[stage]}")


# --- the High finding: one stage's role cannot change another stage ------------------


def test_dev_role_cannot_update_or_delete_staging_or_prod(ci: CiSynth) -> None:
    asks = [
        Ask(f"sagemaker:{action}", _endpoint(ci, stage))
        for stage in STAGES
        for action in ("UpdateEndpoint", "DeleteEndpoint")
    ]
    decisions = dict(zip(asks, ci.roles.decide(ci.role("dev"), asks), strict=True))
    for ask, decision in decisions.items():
        own = ask.resource == _endpoint(ci, "dev")
        assert decision == ("Allowed" if own else "ImplicitlyDenied"), (ask, decision)


@pytest.mark.parametrize("stage", STAGES)
def test_each_role_changes_only_its_own_endpoint(ci: CiSynth, stage: str) -> None:
    changes = ("CreateEndpoint", "UpdateEndpoint", "DeleteEndpoint", "AddTags")
    asks = [Ask(f"sagemaker:{a}", _endpoint(ci, s)) for s in STAGES for a in changes]
    for ask, decision in zip(asks, ci.roles.decide(ci.role(stage), asks), strict=True):
        own = ask.resource == _endpoint(ci, stage)
        assert decision == ("Allowed" if own else "ImplicitlyDenied"), (stage, ask, decision)


def test_models_and_configs_by_exact_derived_name(ci: CiSynth) -> None:
    """`<head>-m` + exactly 8 characters: the dev role's model grant matches dev's
    content-derived names, not `<endpoint>-mirror` nor another stage's models."""
    dev = ci.endpoints["dev"]
    cases = {
        f"model/{dev}-m0123abcd": "Allowed",
        f"endpoint-config/{dev}-c0123abcd": "Allowed",
        f"model/{dev}-mirror": "ImplicitlyDenied",
        f"model/{dev}-mirrored-by-x": "ImplicitlyDenied",
        f"model/{ci.endpoints['prod']}-m0123abcd": "ImplicitlyDenied",
        f"endpoint-config/{ci.endpoints['staging']}-c0123abcd": "ImplicitlyDenied",
    }
    asks = [
        Ask(
            "sagemaker:DeleteModel" if r.startswith("model/") else "sagemaker:DeleteEndpointConfig",
            _arn(r),
        )
        for r in cases
    ]
    assert ci.roles.decide(ci.role("dev"), asks) == list(cases.values())


def test_promotion_source_is_read_and_invoked_never_changed(ci: CiSynth) -> None:
    dev, staging = _endpoint(ci, "dev"), _endpoint(ci, "staging")
    cases = [
        (Ask("sagemaker:InvokeEndpointWithResponseStream", dev), "Allowed"),
        (Ask("sagemaker:DescribeEndpoint", dev), "Allowed"),
        (Ask("sagemaker:UpdateEndpoint", dev), "ImplicitlyDenied"),
        (Ask("sagemaker:DeleteEndpoint", dev), "ImplicitlyDenied"),
        (Ask("sagemaker:InvokeEndpoint", staging), "Allowed"),  # its own
        (Ask("sagemaker:InvokeEndpoint", _endpoint(ci, "prod")), "ImplicitlyDenied"),
    ]
    decisions = ci.roles.decide(ci.role("staging"), [a for a, _ in cases])
    assert decisions == [d for _, d in cases]
    # prod is promoted from staging, not from dev
    prod = ci.roles.decide(ci.role("prod"), [Ask("sagemaker:InvokeEndpoint", dev)])
    assert prod == ["ImplicitlyDenied"]


def test_parameters_written_only_under_the_stage_path(ci: CiSynth) -> None:
    def param(path: str) -> str:
        return _arn(f"parameter/peagle-deploy/{path}", "ssm")

    cases = [
        (Ask("ssm:PutParameter", param(f"staging/{ci.endpoints['staging']}/manifest")), "Allowed"),
        (Ask("ssm:PutParameter", param(f"dev/{ci.endpoints['dev']}/manifest")), "ImplicitlyDenied"),
        (
            Ask("ssm:PutParameter", param(f"prod/{ci.endpoints['prod']}/manifest")),
            "ImplicitlyDenied",
        ),
        (Ask("ssm:PutParameter", _arn("parameter/other/x", "ssm")), "ImplicitlyDenied"),
        (Ask("ssm:GetParameter", param(f"dev/{ci.endpoints['dev']}/manifest")), "Allowed"),
        (
            Ask("ssm:GetParameter", param(f"prod/{ci.endpoints['prod']}/manifest")),
            "ImplicitlyDenied",
        ),
        (
            Ask("ssm:DeleteParameter", param(f"staging/{ci.endpoints['staging']}/manifest")),
            "ImplicitlyDenied",
        ),
    ]
    assert ci.roles.decide(ci.role("staging"), [a for a, _ in cases]) == [d for _, d in cases]


def test_pass_role_only_the_stage_role_only_to_sagemaker(ci: CiSynth) -> None:
    role = f"arn:aws:iam::{ACCOUNT}:role/peagle-sagemaker-dev"

    def ask(stage_tag: str, service: str) -> Ask:
        return Ask(
            "iam:PassRole",
            role,
            {"iam:PassedToService": service, "aws:ResourceTag/peagle:stage": stage_tag},
        )

    cases = [
        (ask("dev", "sagemaker.amazonaws.com"), "Allowed"),
        (ask("prod", "sagemaker.amazonaws.com"), "ImplicitlyDenied"),
        (ask("dev", "ec2.amazonaws.com"), "ImplicitlyDenied"),
        (ask("dev", "lambda.amazonaws.com"), "ImplicitlyDenied"),
    ]
    assert ci.roles.decide(ci.role("dev"), [a for a, _ in cases]) == [d for _, d in cases]


def test_no_managed_policies_and_nothing_on_star_that_could_be_scoped(ci: CiSynth) -> None:
    star_actions: set[str] = set()
    for stage in STAGES:
        for policy in ci.roles.identity_policies(ci.role(stage)):  # asserts no managed ones
            for statement in policy["policy"]["Statement"]:
                if statement["Resource"] == "*":
                    actions = statement["Action"]
                    star_actions |= {actions} if isinstance(actions, str) else set(actions)
    # Only actions without resource-level permissions (Service Authorization Reference).
    # Application Auto Scaling's writes are on the account's scalable targets, with
    # conditions (test_autoscaling_writes_only_sagemaker_endpoint_variants).
    assert star_actions == {
        "sagemaker:ListEndpointConfigs",
        "sagemaker:ListEndpoints",
        "sagemaker:ListModels",
        "sagemaker:ListTrainingJobs",
        "cloudwatch:DescribeAlarms",
        "servicequotas:ListAWSDefaultServiceQuotas",
        "servicequotas:ListServiceQuotas",
        "application-autoscaling:DescribeScalableTargets",
        "application-autoscaling:DescribeScalingPolicies",
        "application-autoscaling:DescribeScheduledActions",
        # experiments: ListInferenceExperiments has no resource type; GetMetricData and
        # ListMetrics only an optional `dataset` (an endpoint is a metric dimension)
        "sagemaker:ListInferenceExperiments",
        "cloudwatch:GetMetricData",
        "cloudwatch:ListMetrics",
    }


# --- the Lows of issue 29: configs of own models, autoscaling of SageMaker only ----------


def _model(ci: CiSynth, stage: str, digest: str = "0123abcd") -> str:
    return _arn(f"model/{derived_name(ci.endpoints[stage], 'm', digest)}")


def test_an_endpoint_config_only_of_the_stages_own_models(ci: CiSynth) -> None:
    """CreateEndpointConfig is bound to the stage's own models (`sagemaker:ModelArn`): a
    config of dev's name that serves prod's model (and so prod's environment) is denied."""
    config = _arn(f"endpoint-config/{derived_name(ci.endpoints['dev'], 'c', '0123abcd')}")

    def ask(model: str) -> Ask:
        return Ask("sagemaker:CreateEndpointConfig", config, {"sagemaker:ModelArn": model})

    cases = [
        (ask(_model(ci, "dev")), "Allowed"),
        (ask(_model(ci, "dev", "ffffffff")), "Allowed"),  # a next spec's model
        (ask(_model(ci, "prod")), "ImplicitlyDenied"),
        (ask(_model(ci, "staging")), "ImplicitlyDenied"),
        (ask(_arn(f"model/{ci.endpoints['dev']}-mirror")), "ImplicitlyDenied"),
        (Ask("sagemaker:CreateEndpointConfig", config), "ImplicitlyDenied"),  # no model
    ]
    assert ci.roles.decide(ci.role("dev"), [a for a, _ in cases]) == [d for _, d in cases]


def test_autoscaling_writes_only_sagemaker_endpoint_variants(ci: CiSynth) -> None:
    target = _arn("scalable-target/0123456789abcdef0123456789abcdef", "application-autoscaling")
    other = f"arn:aws:application-autoscaling:{REGION}:210987654321:scalable-target/0123"
    dev = {"aws:ResourceTag/peagle:stage": "dev"}
    register_dev = {"aws:RequestTag/peagle:stage": "dev", "aws:TagKeys": ["peagle:stage"]}

    def ask(
        action: str,
        namespace: str,
        dimension: str,
        resource: str = target,
        tags: dict[str, Any] | None = None,
    ) -> Ask:
        default = register_dev if action == "RegisterScalableTarget" else dev
        return Ask(
            f"application-autoscaling:{action}",
            resource,
            {
                "application-autoscaling:service-namespace": namespace,
                "application-autoscaling:scalable-dimension": dimension,
                **(default if tags is None else tags),
            },
        )

    variant = "sagemaker:variant:DesiredInstanceCount"
    cases = [
        (ask("RegisterScalableTarget", "sagemaker", variant), "Allowed"),
        (ask("PutScalingPolicy", "sagemaker", variant), "Allowed"),
        (ask("DeregisterScalableTarget", "sagemaker", variant), "Allowed"),
        (ask("RegisterScalableTarget", "ecs", "ecs:service:DesiredCount"), "ImplicitlyDenied"),
        (
            ask("DeleteScalingPolicy", "dynamodb", "dynamodb:table:ReadCapacityUnits"),
            "ImplicitlyDenied",
        ),
        (
            ask(
                "RegisterScalableTarget",
                "sagemaker",
                "sagemaker:inference-component:DesiredCopyCount",
            ),
            "ImplicitlyDenied",
        ),
        (ask("RegisterScalableTarget", "sagemaker", variant, other), "ImplicitlyDenied"),
    ]
    assert ci.roles.decide(ci.role("dev"), [a for a, _ in cases]) == [d for _, d in cases]


@pytest.mark.parametrize("stage", STAGES)
def test_autoscaling_writes_only_the_targets_of_its_own_stage(ci: CiSynth, stage: str) -> None:
    """Issue 29 (Low): each stage's role may change only scalable targets tagged with its
    stage, and may register a new one only with that tag."""
    target = _arn("scalable-target/0123456789abcdef0123456789abcdef", "application-autoscaling")
    variants = {
        "application-autoscaling:service-namespace": "sagemaker",
        "application-autoscaling:scalable-dimension": "sagemaker:variant:DesiredInstanceCount",
    }

    def ask(action: str, tags: dict[str, Any]) -> Ask:
        return Ask(f"application-autoscaling:{action}", target, {**variants, **tags})

    cases = []
    for owner in STAGES:
        tagged = {"aws:ResourceTag/peagle:stage": owner}
        mine = "Allowed" if owner == stage else "ImplicitlyDenied"
        for action in ("PutScalingPolicy", "DeleteScalingPolicy", "DeregisterScalableTarget"):
            cases.append((ask(action, tagged), mine))
        # registering (updating) an existing target of another stage, with this stage's tag
        request = {"aws:RequestTag/peagle:stage": stage, "aws:TagKeys": ["peagle:stage"]}
        cases.append((ask("RegisterScalableTarget", {**tagged, **request}), mine))
        # a new target must carry this stage's tag
        request = {"aws:RequestTag/peagle:stage": owner, "aws:TagKeys": ["peagle:stage"]}
        cases.append((ask("RegisterScalableTarget", request), mine))
    untagged = "ImplicitlyDenied"
    cases += [
        (ask("DeregisterScalableTarget", {}), untagged),
        (ask("PutScalingPolicy", {}), untagged),
        (ask("RegisterScalableTarget", {}), untagged),
    ]
    decisions = ci.roles.decide(ci.role(stage), [a for a, _ in cases])
    assert [(a.action, dict(a.context), d) for (a, _), d in zip(cases, decisions, strict=True)] == [
        (a.action, dict(a.context), d) for a, d in cases
    ]


# --- trust: only the stage's GitHub environment, on main ---------------------------------


def _token(
    stage: str,
    *,
    repo: str = REPO,
    aud: str = "sts.amazonaws.com",
    ref: str = "refs/heads/main",
    **claims: str,
) -> dict[str, str]:
    return {
        f"{GITHUB_OIDC_HOST}:sub": f"repo:{repo}:environment:{stage}",
        f"{GITHUB_OIDC_HOST}:aud": aud,
        f"{GITHUB_OIDC_HOST}:ref": ref,
        **{f"{GITHUB_OIDC_HOST}:{k}": v for k, v in claims.items()},
    }


KNOWN_CLAIMS = ("ref", "repository_id", "repository_owner_id")
"""The claims iam-simulate's Service Authorization Reference data attaches to
AssumeRoleWithWebIdentity (so it decides them); `sub` and `aud` it does not."""


def _assume(roles: TemplateRoles, role_id: str, context: dict[str, str]) -> str:
    """Whether a GitHub ID token with these claims may assume the role.

    Two evaluators decide together. iam-simulate decides the principal, the action and
    the claims of KNOWN_CLAIMS but attaches the classic `sub` and `aud` keys to no action,
    so it can only say "allowed if they match" (Discovery mode, the others declared
    known). The project's own evaluator (peagle_local.emulator.iam_policy, StringEquals
    as IAM applies it) decides every condition, `sub` and `aud` included. Both must allow;
    on the claims both decide, they must agree.
    """
    provider = f"arn:aws:iam::{ACCOUNT}:oidc-provider/{GITHUB_OIDC_HOST}"
    trust = roles.trust(role_id)
    simulation = {
        "mode": "Discovery",
        "known": [f"{GITHUB_OIDC_HOST}:{claim}" for claim in KNOWN_CLAIMS],
        "request": {
            "principal": provider,
            "action": "sts:AssumeRoleWithWebIdentity",
            "resource": {"resource": roles.role_arn(role_id), "accountId": ACCOUNT},
            "contextVariables": context,
        },
        "identityPolicies": [],
        "resourcePolicy": trust,
    }
    (result,) = run([simulation])
    assert result["decision"] != "Error", result["errors"]
    oracle = result["decision"] == "Allowed"
    statements = [{**st, "Resource": "*"} for st in trust["Statement"]]
    own = (
        evaluate(
            [NamedPolicy("trust", "role", {"Statement": statements})],
            "sts:AssumeRoleWithWebIdentity",
            context={k: [v] for k, v in context.items()},
        ).decision
        == "allowed"
    )
    conditions = statements[0]["Condition"]["StringEquals"]
    decided = [f"{GITHUB_OIDC_HOST}:{claim}" for claim in KNOWN_CLAIMS]
    if any(k in conditions and context.get(k) != conditions[k] for k in decided):
        assert not oracle and not own, "the evaluators disagree on a claim both decide"
    return "Allowed" if oracle and own else "ImplicitlyDenied"


def test_only_the_stages_environment_on_the_branch_assumes_its_role(ci: CiSynth) -> None:
    role = ci.role("dev")
    assert _assume(ci.roles, role, _token("dev")) == "Allowed"
    for token in (
        _token("prod"),  # another environment's job
        _token("dev", ref="refs/heads/feature"),  # a run of another branch
        _token("dev", repo="evil/llm-serving"),  # another repository
        _token("dev", aud="https://github.com/acme"),  # a token not asked for STS
    ):
        assert _assume(ci.roles, role, token) == "ImplicitlyDenied", token


REPOSITORY_ID, OWNER_ID = "456789", "123456"


def _build_pinned(outdir: Path) -> CiSynth:
    context = cdk_context()
    (stage,) = [s for s in stage_configs(context[STAGES_CONTEXT_KEY], ROOT) if s.name == "dev"]
    plan = stage.plan()
    app = cdk.App(outdir=str(outdir), context=context)
    repo = GitHubRepo.parse(REPO, "test").with_ids(REPOSITORY_ID, int(OWNER_ID), ("a", "b"))
    CiRolesStack(app, CI_STACK_ID, repo=repo, stages=[stage], plans=[plan], account=ACCOUNT)
    app.synth()
    template = json.loads((outdir / f"{CI_STACK_ID}.template.json").read_text())
    return CiSynth(template, {"dev": plan.endpoint_name}, [])


@pytest.fixture(scope="session")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> CiSynth:
    return synthesize_once("ci-roles-pinned", tmp_path_factory, _build_pinned)  # type: ignore[arg-type]


def test_the_trust_pins_the_repositorys_ids_when_given(pinned: CiSynth) -> None:
    """A repository deleted and re-created under the same name, or a name taken over after
    a rename or transfer, has the same `sub` but other ids (issue 29, Low)."""
    role = pinned.role("dev")
    (statement,) = pinned.roles.trust(role)["Statement"]
    assert statement["Condition"]["StringEquals"][f"{GITHUB_OIDC_HOST}:repository_id"] == (
        REPOSITORY_ID
    )
    own = {"repository_id": REPOSITORY_ID, "repository_owner_id": OWNER_ID}
    assert _assume(pinned.roles, role, _token("dev", **own)) == "Allowed"
    for claims in (
        {**own, "repository_id": "999999"},  # re-created repository, same name
        {**own, "repository_owner_id": "999999"},  # the name under another owner
        {},  # a token without the ids
    ):
        assert _assume(pinned.roles, role, _token("dev", **claims)) == "ImplicitlyDenied"


@pytest.mark.parametrize(
    ("repo", "ids", "ok"),
    [
        ("acme/llm", ("456789", "123456"), True),
        ("acme/llm", (456789, None), True),
        ("acme@123456/llm@456789", ("456789", "123456"), True),
        ("acme@123456/llm@456789", ("456780", None), False),  # not the id the name says
        ("acme/llm", ("12a", None), False),
        ("acme/llm", (None, True), False),
        ("acme/llm", ("1" * 21, None), False),
    ],
)
def test_repository_ids_are_checked(repo: str, ids: tuple[object, object], ok: bool) -> None:
    fields = ("-c peagle:github_repository_id", "-c peagle:github_repository_owner_id")
    parsed = GitHubRepo.parse(repo, "-c peagle:github_repo")
    if ok:
        pinned = parsed.with_ids(*ids, fields)
        assert pinned.repository_id == (str(ids[0]) if ids[0] is not None else None)
    else:
        with pytest.raises(InputError, match="peagle:github_repository"):
            parsed.with_ids(*ids, fields)


def test_trust_conditions_are_exact_string_equals(ci: CiSynth) -> None:
    for stage in STAGES:
        (statement,) = ci.roles.trust(ci.role(stage))["Statement"]
        assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
        assert set(statement["Condition"]) == {"StringEquals"}
        assert statement["Condition"]["StringEquals"] == {
            f"{GITHUB_OIDC_HOST}:aud": "sts.amazonaws.com",
            f"{GITHUB_OIDC_HOST}:sub": f"repo:{REPO}:environment:{stage}",
            f"{GITHUB_OIDC_HOST}:ref": "refs/heads/main",
        }


# --- the template itself ---------------------------------------------------------------


def test_cdk_nag_and_cfn_lint_are_clean(ci: CiSynth) -> None:
    assert ci.nag_violations == []
    findings = lint(json.dumps(ci.template), config=ManualArgs(regions=[REGION]))
    assert [(m.rule.id, m.message) for m in findings] == []


def test_the_provider_is_native_and_accepts_only_sts(ci: CiSynth) -> None:
    providers = [
        r for r in ci.template["Resources"].values() if r["Type"] == "AWS::IAM::OIDCProvider"
    ]
    assert len(providers) == 1
    assert providers[0]["Properties"]["Url"] == f"https://{GITHUB_OIDC_HOST}"
    assert providers[0]["Properties"]["ClientIdList"] == ["sts.amazonaws.com"]
    assert not [
        r for r in ci.template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
    ]
    outputs = ci.template["Outputs"]
    assert {k for k in outputs if k.startswith("DeployRoleArn")} == {
        "DeployRoleArnDev",
        "DeployRoleArnStaging",
        "DeployRoleArnProd",
    }


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("acme/llm-serving", True),
        ("a/b.c_d-e", True),
        ("acme@123456/llm-serving@789012", True),
        ("acme@123456/llm-serving", False),
        ("acme@x/llm-serving@1", False),
        ("acme", False),
        ("acme/llm/serving", False),
        ("-acme/x", False),
        ("acme/..", False),
        ("acme/x\n", False),
        ("", False),
        (7, False),
    ],
)
def test_github_repo_is_checked(value: object, ok: bool) -> None:
    if ok:
        assert str(GitHubRepo.parse(value, "-c peagle:github_repo")) == value
    else:
        with pytest.raises(InputError, match="peagle:github_repo"):
            GitHubRepo.parse(value, "-c peagle:github_repo")


def test_provider_choice_is_checked() -> None:
    arn = f"arn:aws:iam::{ACCOUNT}:oidc-provider/{GITHUB_OIDC_HOST}"
    assert check_provider_choice(None, "x") == "create"
    assert check_provider_choice("existing", "x") == "existing"
    assert check_provider_choice(arn, "x") == arn
    for bad in ("yes", f"arn:aws:iam::{ACCOUNT}:oidc-provider/gitlab.com", arn + "\n"):
        with pytest.raises(InputError, match="peagle:github_oidc_provider"):
            check_provider_choice(bad, "-c peagle:github_oidc_provider")


def test_app_refuses_a_bad_repository_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    import app

    context = {**cdk_context(), "peagle:github_repo": "acme", "@aws-cdk/core:outdir": str(tmp_path)}
    assert app.main(context) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: -c peagle:github_repo: 'acme' is not a GitHub repository (allowed: "
        "OWNER/REPO, or OWNER@ORG_ID/REPO@REPO_ID for immutable subject claims)"
    ]


def test_app_refuses_a_bad_repository_id_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    import app

    context = {
        **cdk_context(),
        "peagle:github_repo": "acme/llm",
        "peagle:github_repository_id": "12ab",
        "@aws-cdk/core:outdir": str(tmp_path),
    }
    assert app.main(context) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: -c peagle:github_repository_id: '12ab' is not a GitHub id (allowed: 1-20 digits)"
    ]
