"""Training per stage (issue 36 item 3): the role SageMaker trains with (infra/training.py)
and the CI roles' training grants (infra/deploy_policy.py `training_statements`), decided
by @cloud-copilot/iam-simulate on the synthesized templates.

Every request is the product map's (`catalog.iam_calls`) of a call as it is made: what
`peagle train` sends as the stage's CI role (CreateTrainingJob with its tag-on-create and
its PassRole, Describe/Stop/List, the log streams, the drafter's metadata, the doctor's
reads), and what SageMaker does with the training role (the channels read, the output and
checkpoints written with the stage's key, the image pulled, logs and metrics). Each is
asked of its own stage's role (allowed) and of every other stage's (denied), less what
the stages request alike (the training image's repository, the log group's stream names,
SageMaker's quotas: read-only and nobody's). Printed with `-s`:

    .venv/bin/pytest -q -n 0 -s tests/infra/test_infra_training.py -k verdicts
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cdk_helpers import ROOT, Synthesized, cdk_context, synthesize_once
from iam_oracle import ACCOUNT, Ask, TemplateRoles, run
from peagle_train.contract import drafter_uri
from test_infra_ci_roles import CiSynth, _build

from infra.deploy_policy import Arns, StageResources, training_statements
from infra.execution_policy import volume_key_services
from infra.stages import STAGES_CONTEXT_KEY, stage_configs
from peagle_deploy.catalog.iam_calls import Where, iam_requests
from peagle_deploy.errors import InputError
from peagle_deploy.naming import STAGE_TAG
from peagle_deploy.stage_training import (
    TRAINING_LOG_GROUP,
    TRAINING_METRICS_NAMESPACE,
    TRAINING_STAGE_TAG,
    StageTraining,
    stage_training,
    training_overlap,
    training_vpc,
)

pytestmark = [pytest.mark.xdist_group(name="cdk"), pytest.mark.slow]

REGION = "us-east-1"
STAGES = ("dev", "staging", "prod")
Extra = Mapping[str, Mapping[str, Any]]
"""Per IAM action, what the request context adds that no parameter says (the service a
key is used through, a resource's tags); "*" for every request of the call."""
Call = tuple[str, str, Mapping[str, Any], Extra]


@pytest.fixture(scope="session")
def ci(tmp_path_factory: pytest.TempPathFactory) -> CiSynth:
    return synthesize_once("ci-roles", tmp_path_factory, _build)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Stage:
    """One stage's training block and the names its stage stack gave its role and key."""

    name: str
    training: StageTraining
    roles: TemplateRoles
    role_id: str
    key_arn: str
    key_policy: Mapping[str, Any]

    @property
    def role_arn(self) -> str:
        return self.roles.role_arn(self.role_id)

    def job(self, suffix: str = "qwen3-8b-0001") -> str:
        return f"{self.training.job_prefix}{suffix}"


def _stages(synth: Synthesized) -> dict[str, Stage]:
    out = {}
    for stack, info in synth.stacks.items():
        training = stage_configs(cdk_context()[STAGES_CONTEXT_KEY], ROOT)
        (config,) = [s for s in training if s.stack_id == stack]
        assert config.training is not None
        roles = TemplateRoles(synth.templates[stack], info.region, stack=stack)
        (key,) = synth.resources(stack, "AWS::KMS::Key")
        out[config.name] = Stage(
            config.name,
            config.training,
            roles,
            roles.role_id("TrainingRole"),
            roles.key_arn(key),
            roles.key_policy(key),
        )
    return out


@pytest.fixture(scope="module")
def stages(stage_synth: Synthesized) -> dict[str, Stage]:
    return _stages(stage_synth)


def create_training_job(stage: Stage, **changes: Any) -> dict[str, Any]:
    """A CreateTrainingJob as a plan of the stage renders it (its names, its key, its
    role), with `changes` (None removes a field)."""
    t = stage.training
    request: dict[str, Any] = {
        "TrainingJobName": stage.job(),
        "RoleArn": stage.role_arn,
        "AlgorithmSpecification": {
            "TrainingImage": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{t.image_repository}:1",
            "TrainingInputMode": "File",
        },
        "InputDataConfig": [
            {
                "ChannelName": name,
                "DataSource": {"S3DataSource": {"S3Uri": f"s3://{r.bucket}/{r.key}"}},
            }
            for name, r in (("target", t.target), ("data", t.data))
        ],
        "OutputDataConfig": {
            "S3OutputPath": f"s3://{t.output.bucket}/{t.output.key}",
            "KmsKeyId": stage.key_arn,
            "CompressionType": "NONE",
        },
        "ResourceConfig": {
            "InstanceType": "ml.p5.48xlarge",
            "InstanceCount": 1,
            "VolumeSizeInGB": 200,
            "VolumeKmsKeyId": stage.key_arn,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "EnableNetworkIsolation": True,
        "EnableInterContainerTrafficEncryption": True,
        "Tags": [
            {"Key": STAGE_TAG, "Value": stage.name},
            {"Key": "peagle:managed", "Value": "true"},
        ],
    }
    for name, value in changes.items():
        if value is None:
            request.pop(name, None)
        else:
            request[name] = value
    return request


def ci_calls(stage: Stage) -> list[Call]:
    """What `peagle train` start, status, logs, stop and the doctor send as the CI role."""
    t, job = stage.training, stage.job()
    metadata = drafter_uri(f"s3://{t.output.bucket}/{t.output.key}", job).removeprefix(
        f"s3://{t.output.bucket}/"
    )
    stream = f"{job}/algo-1-1764300000"
    own_role = {TRAINING_STAGE_TAG: stage.name}
    bucket = {"*": {"s3:ResourceAccount": ACCOUNT}}
    calls: list[Call] = [
        (
            "sagemaker",
            "CreateTrainingJob",
            create_training_job(stage),
            {"iam:PassRole": {f"aws:ResourceTag/{k}": v for k, v in own_role.items()}},
        ),
        ("sagemaker", "DescribeTrainingJob", {"TrainingJobName": job}, {}),
        ("sagemaker", "StopTrainingJob", {"TrainingJobName": job}, {}),
        ("sagemaker", "ListTrainingJobs", {"NameContains": t.job_prefix}, {}),
        (
            "logs",
            "DescribeLogStreams",
            {"logGroupName": TRAINING_LOG_GROUP, "logStreamNamePrefix": job},
            {},
        ),
        ("logs", "GetLogEvents", {"logGroupName": TRAINING_LOG_GROUP, "logStreamName": stream}, {}),
        (
            "s3",
            "GetObject",
            {"Bucket": t.output.bucket, "Key": metadata + "peagle-drafter.json"},
            bucket,
        ),
        (
            "kms",
            "Decrypt",
            {"KeyId": stage.key_arn},
            {
                "*": {
                    "kms:ViaService": f"s3.{REGION}.amazonaws.com",
                    f"aws:ResourceTag/{STAGE_TAG}": stage.name,
                }
            },
        ),
        (
            "iam",
            "GetRole",
            {"RoleName": stage.role_arn.split("/")[-1]},
            {"*": {f"aws:ResourceTag/{TRAINING_STAGE_TAG}": stage.name}},
        ),
        (
            "sagemaker",
            "ListTags",
            {"ResourceArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{job}"},
            {},
        ),
        ("service-quotas", "ListServiceQuotas", {"ServiceCode": "sagemaker"}, {}),
    ]
    for read in (t.target, t.data, t.output):
        calls.append(("s3", "ListObjectsV2", {"Bucket": read.bucket, "Prefix": read.key}, bucket))
    # the doctor: the target's chat template, a conversation file, the key's state, the
    # training role's own grants (simulated)
    for read, name in ((t.target, "tokenizer_config.json"), (t.data, "chats-0.jsonl")):
        calls.append(("s3", "GetObject", {"Bucket": read.bucket, "Key": read.key + name}, bucket))
    tagged = {"*": {f"aws:ResourceTag/{STAGE_TAG}": stage.name}}
    calls.append(("kms", "DescribeKey", {"KeyId": stage.key_arn}, tagged))
    calls.append(
        (
            "iam",
            "SimulatePrincipalPolicy",
            {"PolicySourceArn": stage.role_arn},
            {"*": {f"aws:ResourceTag/{TRAINING_STAGE_TAG}": stage.name}},
        )
    )
    return calls


def sagemaker_calls(stage: Stage) -> list[Call]:
    """What SageMaker does with the training role for one of the stage's jobs."""
    t, job = stage.training, stage.job()
    bucket = {"*": {"s3:ResourceAccount": ACCOUNT}}
    via_s3 = {"*": {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}}
    stream = {"logGroupName": TRAINING_LOG_GROUP, "logStreamName": f"{job}/algo-1-1764300000"}
    out_key = f"{t.output.key}{job}/output/model/drafter/model.safetensors"
    ckpt = t.checkpoints or t.output
    calls: list[Call] = []
    for read in (t.target, t.data):
        calls.append(("s3", "ListObjectsV2", {"Bucket": read.bucket, "Prefix": read.key}, bucket))
        calls.append(
            ("s3", "GetObject", {"Bucket": read.bucket, "Key": f"{read.key}part-0"}, bucket)
        )
    calls += [
        ("s3", "PutObject", {"Bucket": t.output.bucket, "Key": out_key}, bucket),
        ("s3", "PutObject", {"Bucket": ckpt.bucket, "Key": f"{ckpt.key}{job}/step-100.pt"}, bucket),
        ("s3", "GetObject", {"Bucket": ckpt.bucket, "Key": f"{ckpt.key}{job}/step-100.pt"}, bucket),
        ("s3", "ListObjectsV2", {"Bucket": ckpt.bucket, "Prefix": f"{ckpt.key}{job}/"}, bucket),
        ("ecr", "GetAuthorizationToken", {}, {}),
        ("logs", "CreateLogGroup", {"logGroupName": TRAINING_LOG_GROUP}, {}),
        ("logs", "DescribeLogStreams", {"logGroupName": TRAINING_LOG_GROUP}, {}),
        ("logs", "CreateLogStream", stream, {}),
        ("logs", "PutLogEvents", stream, {}),
        ("cloudwatch", "PutMetricData", {"Namespace": TRAINING_METRICS_NAMESPACE}, {}),
    ]
    for op in ("Decrypt", "Encrypt", "GenerateDataKey"):
        calls.append(("kms", op, {"KeyId": stage.key_arn}, via_s3))
    for service in volume_key_services(REGION):
        grant = {"kms:ViaService": service, "kms:GrantIsForAWSResource": "true"}
        calls.append(("kms", "CreateGrant", {"KeyId": stage.key_arn}, {"*": grant}))
    repo = {"registryId": ACCOUNT, "repositoryName": t.image_repository}
    for op in ("BatchCheckLayerAvailability", "BatchGetImage", "GetDownloadUrlForLayer"):
        calls.append(("ecr", op, repo, {}))
    return calls


def asks(calls: Sequence[Call]) -> list[Ask]:
    """The product map's requests of each call, with what the context adds."""
    out = []
    for service, operation, params, extra in calls:
        for r in iam_requests(service, operation, params, Where(REGION, ACCOUNT)):
            context = {k: list(v) if isinstance(v, tuple) else v for k, v in r.context.items()}
            context |= {**extra.get("*", {}), **extra.get(r.action, {})}
            out.append(Ask(r.action, r.resource, context))
    return out


@dataclass
class Verdicts:
    own: int = 0
    others: int = 0
    broken: list[tuple[str, str, str]] | None = None
    reaching: list[tuple[str, str, str, str]] | None = None

    def line(self, role: str) -> str:
        assert self.broken is not None and self.reaching is not None
        return (
            f"{role}: own stage allowed {self.own - len(self.broken)}/{self.own}; "
            f"other stages' denied {self.others - len(self.reaching)}/{self.others}"
        )


def judge(
    roles: Mapping[str, tuple[TemplateRoles, str]],
    requests: Mapping[str, list[Ask]],
    key_policies: Mapping[str, Mapping[str, Any]],
) -> dict[str, Verdicts]:
    """Each stage's requests of its own role and of every other stage's role (less what
    the asking stage requests alike), in one batch; verdicts per role's stage."""
    asked: list[tuple[str, str, Ask]] = []
    for mine in roles:
        own = {(a.action, a.resource) for a in requests[mine]}
        for stage, stage_asks in requests.items():
            asked += [
                (mine, stage, a)
                for a in stage_asks
                if stage == mine or (a.action, a.resource) not in own
            ]
    results = run(
        [
            roles[mine][0].simulation(roles[mine][1], a, key_policies.get(a.resource))
            for mine, _, a in asked
        ]
    )
    verdicts = {s: Verdicts(broken=[], reaching=[]) for s in roles}
    for (mine, stage, ask), result in zip(asked, results, strict=True):
        assert result["decision"] != "Error", (ask, result["errors"])
        assert not result["ignored"], (ask, result["ignored"])
        v = verdicts[mine]
        allowed = result["decision"] == "Allowed"
        assert v.broken is not None and v.reaching is not None
        if stage == mine:
            v.own += 1
            if not allowed:
                v.broken.append((stage, ask.action, ask.resource))
        else:
            v.others += 1
            if allowed:
                v.reaching.append((mine, stage, ask.action, ask.resource))
    return verdicts


def _key_policies(stages: Mapping[str, Stage]) -> dict[str, Mapping[str, Any]]:
    return {s.key_arn: s.key_policy for s in stages.values()}


# --- the verdicts -----------------------------------------------------------------------


def test_verdicts_of_the_training_roles(stages: dict[str, Stage]) -> None:
    requests = {name: asks(sagemaker_calls(s)) for name, s in stages.items()}
    roles = {name: (s.roles, s.role_id) for name, s in stages.items()}
    verdicts = judge(roles, requests, _key_policies(stages))
    for name in STAGES:
        print(verdicts[name].line(f"training role {name}"))
        assert verdicts[name].others > 0
        assert verdicts[name].broken == [], "SageMaker could not run the stage's own job"
        assert verdicts[name].reaching == [], "a training role reaches another stage"


def test_verdicts_of_the_ci_roles_training_grants(ci: CiSynth, stages: dict[str, Stage]) -> None:
    requests = {name: asks(ci_calls(s)) for name, s in stages.items()}
    roles = {name: (ci.roles, ci.role(name)) for name in STAGES}
    verdicts = judge(roles, requests, _key_policies(stages))
    for name in STAGES:
        print(verdicts[name].line(f"CI role {name} (training)"))
        assert verdicts[name].others > 0
        assert verdicts[name].broken == [], "peagle train is denied its own stage's call"
        assert verdicts[name].reaching == [], "a CI role reaches another stage's training"


# --- what the isolation rests on, one case each ----------------------------------------


def _decide(
    roles: TemplateRoles, role_id: str, calls: Sequence[Call], keys: Any = None
) -> list[str]:
    found = asks(calls)
    results = run([roles.simulation(role_id, a, (keys or {}).get(a.resource)) for a in found])
    for ask, result in zip(found, results, strict=True):
        assert result["decision"] != "Error", (ask, result["errors"])
        assert not result["ignored"], (ask, result["ignored"])
    return [str(r["decision"]) for r in results]


def test_dev_cannot_pass_prods_training_role_nor_write_prods_output_nor_read_its_data(
    ci: CiSynth, stages: dict[str, Stage]
) -> None:
    dev, prod = stages["dev"], stages["prod"]
    # a dev job that names prod's training role: the CI role may not pass it
    stolen = create_training_job(dev, RoleArn=prod.role_arn)
    extra = {"iam:PassRole": {f"aws:ResourceTag/{TRAINING_STAGE_TAG}": "prod"}}
    decisions = dict(
        zip(
            [a.action for a in asks([("sagemaker", "CreateTrainingJob", stolen, extra)])],
            _decide(ci.roles, ci.role("dev"), [("sagemaker", "CreateTrainingJob", stolen, extra)]),
            strict=True,
        )
    )
    assert decisions == {
        "sagemaker:CreateTrainingJob": "Allowed",
        "sagemaker:AddTags": "Allowed",
        "iam:PassRole": "ImplicitlyDenied",
    }
    # a dev job whose output is prod's prefix: CreateTrainingJob has no S3 condition key,
    # so SageMaker starts it with dev's role, which may not write there nor read prod's data
    p = prod.training
    bucket = {"*": {"s3:ResourceAccount": ACCOUNT}}
    reach = [
        (
            "s3",
            "PutObject",
            {"Bucket": p.output.bucket, "Key": f"{p.output.key}x/model.bin"},
            bucket,
        ),
        ("s3", "GetObject", {"Bucket": p.data.bucket, "Key": f"{p.data.key}part-0"}, bucket),
        (
            "s3",
            "GetObject",
            {"Bucket": p.target.bucket, "Key": f"{p.target.key}config.json"},
            bucket,
        ),
        (
            "kms",
            "GenerateDataKey",
            {"KeyId": prod.key_arn},
            {"*": {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}},
        ),
    ]
    assert set(_decide(dev.roles, dev.role_id, reach, _key_policies(stages))) == {
        "ImplicitlyDenied"
    }


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"EnableNetworkIsolation": None}, "network isolation off"),
        ({"EnableNetworkIsolation": False}, "network isolation false"),
        ({"EnableInterContainerTrafficEncryption": None}, "traffic between instances in clear"),
        (
            {"OutputDataConfig": {"S3OutputPath": "s3://acme-peagle-training-prod/drafters/"}},
            "no output key",
        ),
        (
            {
                "ResourceConfig": {
                    "InstanceType": "ml.p5.48xlarge",
                    "InstanceCount": 1,
                    "VolumeSizeInGB": 9,
                    "VolumeKmsKeyId": "arn:aws:kms:us-east-1:999999999999:key/x",
                }
            },
            "another account's volume key",
        ),
        (
            {
                "ResourceConfig": {
                    "InstanceType": "ml.m5.xlarge",
                    "InstanceCount": 1,
                    "VolumeSizeInGB": 9,
                }
            },
            "an instance type prod does not train on",
        ),
        ({"TrainingJobName": "peagle-train-dev--qwen3"}, "dev's job name"),
    ],
)
def test_a_create_training_job_without_isolation_or_encryption_is_denied(
    ci: CiSynth, stages: dict[str, Stage], change: dict[str, Any], why: str
) -> None:
    prod = stages["prod"]
    extra = {"iam:PassRole": {f"aws:ResourceTag/{TRAINING_STAGE_TAG}": "prod"}}
    calls: list[Call] = [
        ("sagemaker", "CreateTrainingJob", create_training_job(prod, **change), extra)
    ]
    found = asks(calls)
    decisions = _decide(ci.roles, ci.role("prod"), calls)
    create = decisions[[a.action for a in found].index("sagemaker:CreateTrainingJob")]
    assert create == "ImplicitlyDenied", why
    # and the request as the plan renders it is allowed
    whole = [("sagemaker", "CreateTrainingJob", create_training_job(prod), extra)]
    assert set(_decide(ci.roles, ci.role("prod"), whole)) == {"Allowed"}


def test_no_ci_role_reads_the_training_log_group_as_a_whole(ci: CiSynth) -> None:
    """FilterLogEvents names the log group only (the reference: `log-group` required), so
    a grant would read every stage's training logs: `peagle train logs` lists its job's
    streams by prefix (stream names only) and reads them with GetLogEvents."""
    calls: list[Call] = [
        (
            "logs",
            "FilterLogEvents",
            {"logGroupName": TRAINING_LOG_GROUP, "logStreamNamePrefix": "x"},
            {},
        )
    ]
    for stage in STAGES:
        assert _decide(ci.roles, ci.role(stage), calls) == ["ImplicitlyDenied"]


def test_sagemaker_assumes_the_training_role_only_for_the_stages_own_jobs(
    stages: dict[str, Stage],
) -> None:
    dev, prod = stages["dev"], stages["prod"]

    def assume(stage: Stage, job: str, account: str = ACCOUNT) -> str:
        source = f"arn:aws:sagemaker:{REGION}:{account}:training-job/{job}"
        (result,) = run(
            [
                {
                    "request": {
                        "principal": "sagemaker.amazonaws.com",
                        "action": "sts:AssumeRole",
                        "resource": {"resource": stage.role_arn, "accountId": ACCOUNT},
                        "contextVariables": {"aws:SourceArn": source, "aws:SourceAccount": account},
                    },
                    "identityPolicies": [],
                    "resourcePolicy": stage.roles.trust(stage.role_id),
                }
            ]
        )
        assert result["decision"] != "Error", result["errors"]
        return str(result["decision"])

    assert assume(dev, dev.job()) == "Allowed"
    assert assume(dev, prod.job()) == "ImplicitlyDenied"  # prod's job cannot use dev's role
    assert assume(prod, dev.job()) == "ImplicitlyDenied"
    assert assume(dev, dev.job(), "999999999999") == "ImplicitlyDenied"  # confused deputy
    assert assume(dev, "peagle-train-dev-x") == "ImplicitlyDenied"  # not the stage's prefix


# --- the templates ----------------------------------------------------------------------


def _size(policy: Mapping[str, Any]) -> int:
    return len("".join(json.dumps(policy, separators=(",", ":")).split()))


def test_the_ci_roles_policies_fit_iams_size_quotas(ci: CiSynth) -> None:
    """IAM quotas: a role's inline policies hold 10,240 characters in all, a managed policy
    6,144 (white space not counted); the training grants alone would not fit inline."""
    for stage in STAGES:
        role = ci.role(stage)
        inline = managed = 0
        for found in ci.roles.identity_policies(role):
            kind = ci.template["Resources"][found["name"]]["Type"]
            if kind == "AWS::IAM::ManagedPolicy":
                assert _size(found["policy"]) <= 6144, (stage, found["name"])
                managed += 1
            else:
                inline += _size(found["policy"])
        assert managed == 1 and 0 < inline <= 10240, (stage, inline, managed)


def test_the_training_role_is_tagged_for_its_stage_and_never_as_an_execution_role(
    stage_synth: Synthesized, edge_synth: Synthesized
) -> None:
    for synth in (stage_synth, edge_synth):
        for stack, info in synth.stacks.items():
            roles = synth.resources(stack, "AWS::IAM::Role")
            (role,) = [r for lid, r in roles.items() if "TrainingRole" in lid]
            tags = {t["Key"]: t["Value"] for t in role["Properties"]["Tags"]}
            assert tags[TRAINING_STAGE_TAG] == info.plan.spec.stage
            assert tags["peagle:role"] == "training" and STAGE_TAG not in tags
            assert not role["Properties"].get("ManagedPolicyArns")


def test_a_stage_in_a_vpc_trains_in_it(edge_synth: Synthesized) -> None:
    """The edge stage serves in a VPC and names no training VPC: its training role may
    make ENIs only in the spec's subnets and groups, its CI role create jobs only there."""
    from cdk_helpers import edge_stage

    (stack,) = edge_synth.stacks
    info = edge_synth.stacks[stack]
    roles = TemplateRoles(edge_synth.templates[stack], "eu-west-1", stack=stack)
    policy = json.dumps(roles.identity_policies(roles.role_id("TrainingRole")))
    vpc = info.plan.create_model["VpcConfig"]
    for subnet in vpc["Subnets"]:
        assert f"subnet/{subnet}" in policy
    assert "ec2:CreateNetworkInterface" in policy
    edge = edge_stage()
    assert edge.training is not None
    own = StageResources(
        "edge",
        "eu-west-1",
        info.plan.endpoint_name,
        training=edge.training,
        training_vpc=training_vpc(edge.training, vpc),
    )
    (create,) = [
        s
        for s in training_statements(Arns("aws", ACCOUNT), own)
        if s["Sid"] == "CreateOwnTrainingJobs"
    ]
    every = create["Condition"]["ForAllValues:StringEquals"]
    assert every["sagemaker:VpcSubnets"] == sorted(vpc["Subnets"])
    assert every["sagemaker:VpcSecurityGroupIds"] == sorted(vpc["SecurityGroupIds"])
    assert create["Condition"]["Null"] == {k: "false" for k in every}
    assert training_vpc(edge.training, None) is None


def test_a_stage_without_a_training_block_gets_no_training_grant() -> None:
    (dev,) = stage_configs({"dev": {"spec": "stages/dev.yaml"}}, ROOT)
    assert dev.training is None
    plan = dev.plan()
    own = StageResources("dev", plan.region, plan.endpoint_name)
    assert training_statements(Arns("aws", ACCOUNT), own) == []


# --- the stage block's input ------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"bucket": "b-x1"}, "peagle:stages.dev.training.image_repository"),
        ({"image_repository": "r"}, "peagle:stages.dev.training.target_uri"),
        (
            {"bucket": "bkt", "image_repository": "r", "job_prefix": "-x"},
            "peagle:stages.dev.training.job_prefix",
        ),
        (
            {"bucket": "bkt", "image_repository": "r", "job_prefix": "Dev-"},
            "peagle:stages.dev.training.job_prefix",
        ),
        (
            {"bucket": "bkt", "image_repository": "r", "output_uri": "s3://bkt/"},
            "peagle:stages.dev.training.output_uri",
        ),
        (
            {"bucket": "bkt", "image_repository": "r", "data_uri": "s3://bkt/a*/"},
            "peagle:stages.dev.training.data_uri",
        ),
        (
            {"bucket": "bkt", "image_repository": "r", "output_uri": "s3://bkt/out"},
            "peagle:stages.dev.training.output_uri",
        ),
        (
            {"bucket": "bkt", "image_repository": "r", "instance_types": ["p5"]},
            "peagle:stages.dev.training.instance_types",
        ),
        (
            {"bucket": "bkt", "image_repository": "r", "role": "x"},
            "peagle:stages.dev.training.role",
        ),
        (
            {"bucket": "bkt", "image_repository": "ghcr.io/acme/train:1"},
            "peagle:stages.dev.training.image_repository",
        ),
    ],
)
def test_a_bad_training_block_is_one_error_naming_its_key(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        stage_configs({"dev": {"spec": "stages/dev.yaml", "training": raw}}, ROOT)
    assert str(caught.value).startswith(f"{field}: "), str(caught.value)
    assert "\n" not in str(caught.value)


def _two(dev: dict[str, Any], prod: dict[str, Any]) -> dict[str, Any]:
    return {
        "dev": {"spec": "stages/dev.yaml", "training": dev},
        "prod": {"spec": "stages/prod.yaml", "training": prod},
    }


@pytest.mark.parametrize(
    "case",
    [
        (
            {"bucket": "shared-b", "image_repository": "r"},
            {"bucket": "shared-b", "image_repository": "r", "job_prefix": "peagle-train-dev--x"},
            "sagemaker:training-job/peagle-train-dev--*",
        ),
        (
            {"bucket": "shared-b", "image_repository": "r"},
            {
                "target_uri": "s3://other/t/",
                "data_uri": "s3://other/d/",
                "output_uri": "s3://shared-b/peagle-train/",
                "image_repository": "r",
            },
            "s3:",
        ),
    ],
)
def test_synth_refuses_two_stages_whose_training_grants_overlap(
    case: tuple[dict[str, Any], dict[str, Any], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dev, prod, shared = case
    monkeypatch.syspath_prepend(str(ROOT))
    import app

    context = {
        **cdk_context(),
        "peagle:stages": _two(dev, prod),
        "@aws-cdk/core:outdir": str(tmp_path),
    }
    assert app.main(context) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: peagle:stages.prod.training: ")
    assert "stages dev and prod would share training grants" in err[0] and shared in err[0]
    assert not list(tmp_path.glob("*.template.json"))


def test_the_example_stages_training_grants_are_disjoint() -> None:
    configs = stage_configs(cdk_context()[STAGES_CONTEXT_KEY], ROOT)
    trained = [c.training for c in configs if c.training is not None]
    assert len(trained) == 3
    for i, a in enumerate(trained):
        for b in trained[:i]:
            assert training_overlap(a, b) is None
    # a stage whose name begins another's: the default prefixes stay apart
    eu = stage_training({"bucket": "b-eu", "image_repository": "r"}, "dev-eu", "x")
    assert training_overlap(trained[0], eu) is None


# --- the call map -----------------------------------------------------------------------


def test_the_map_resolves_every_training_call_from_the_reference() -> None:
    """CreateTrainingJob: its job, the condition keys the request decides, the tag-on-create
    AddTags and the PassRole; the other calls of `peagle train` on their resources."""
    where = Where(REGION, ACCOUNT)
    key = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k"
    role = f"arn:aws:iam::{ACCOUNT}:role/train"
    job = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/peagle-train-dev--x"
    request = {
        "TrainingJobName": "peagle-train-dev--x",
        "RoleArn": role,
        "OutputDataConfig": {"S3OutputPath": "s3://b/o", "KmsKeyId": key},
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "VolumeKmsKeyId": key},
        "VpcConfig": {"Subnets": ["subnet-1"], "SecurityGroupIds": ["sg-1"]},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "EnableNetworkIsolation": True,
        "EnableInterContainerTrafficEncryption": True,
        "Tags": [{"Key": STAGE_TAG, "Value": "dev"}],
    }
    create, tag, pass_role = iam_requests("sagemaker", "CreateTrainingJob", request, where)
    assert (create.action, create.resource) == ("sagemaker:CreateTrainingJob", job)
    assert dict(create.context) == {
        "aws:RequestTag/peagle:stage": "dev",
        "aws:TagKeys": ("peagle:stage",),
        "sagemaker:InstanceTypes": ("ml.p5.48xlarge",),
        "sagemaker:InterContainerTrafficEncryption": "true",
        "sagemaker:MaxRuntimeInSeconds": "3600",
        "sagemaker:NetworkIsolation": "true",
        "sagemaker:OutputKmsKeyArn": key,
        "sagemaker:VolumeKmsKeyArn": key,
        "sagemaker:VpcSecurityGroupIds": ("sg-1",),
        "sagemaker:VpcSubnets": ("subnet-1",),
    }
    assert (tag.action, tag.resource) == ("sagemaker:AddTags", job)
    assert tag.context["sagemaker:TaggingAction"] == "CreateTrainingJob"
    assert (pass_role.action, pass_role.resource) == ("iam:PassRole", role)
    assert dict(pass_role.context) == {"iam:PassedToService": "sagemaker.amazonaws.com"}
    untagged = {k: v for k, v in request.items() if k != "Tags"}
    assert [r.action for r in iam_requests("sagemaker", "CreateTrainingJob", untagged, where)] == [
        "sagemaker:CreateTrainingJob",
        "iam:PassRole",
    ]
    group = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{TRAINING_LOG_GROUP}"
    cases = {
        ("sagemaker", "DescribeTrainingJob", "TrainingJobName"): job,
        ("sagemaker", "StopTrainingJob", "TrainingJobName"): job,
        ("logs", "FilterLogEvents", "logGroupName"): group,
        ("logs", "DescribeLogStreams", "logGroupName"): group,
    }
    for (service, operation, param), resource in cases.items():
        value = "peagle-train-dev--x" if param == "TrainingJobName" else TRAINING_LOG_GROUP
        (found,) = iam_requests(service, operation, {param: value}, where)
        assert (found.action, found.resource) == (f"{service}:{operation}", resource)
    (listed,) = iam_requests("sagemaker", "ListTrainingJobs", {}, where)
    assert listed.resource == "*"
    stream = {"logGroupName": TRAINING_LOG_GROUP, "logStreamName": "peagle-train-dev--x/algo-1-1"}
    (events,) = iam_requests("logs", "GetLogEvents", stream, where)
    assert events.resource == f"{group}:log-stream:peagle-train-dev--x/algo-1-1"
    quota = {"ServiceCode": "sagemaker", "QuotaCode": "L-1"}
    (got,) = iam_requests("service-quotas", "GetServiceQuota", quota, where)
    assert got.resource == f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:sagemaker/L-1"
    assert dict(got.context) == {"servicequotas:service": "sagemaker"}
