"""Helpers of the training-runtime tests: an emulated account, and SageMaker training jobs
that move through the states a real job goes through.

moto 5.2.5 creates a training job already Completed, replaces a job of the same name
instead of refusing it, and has no StopTrainingJob. `TrainingJobs` answers SageMaker's
training-job operations for one boto3 session instead (botocore `before-call` handlers,
so each request is still validated against botocore's model first): a job walks its
script one step per DescribeTrainingJob (InProgress/Starting ... then Completed, Failed or
whatever the test scripted), StopTrainingJob moves it to Stopping then Stopped, and a
second CreateTrainingJob of a name is ResourceInUse, as SageMaker answers. Everything
else (S3, IAM, STS, KMS, CloudWatch Logs, Service Quotas) is moto with the project's
AccountExtensions.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws
from peagle_local.emulator import AccountExtensions

from peagle_deploy.train.result import TrainingCost, TrainingPlan

REGION = "us-east-1"
ACCOUNT = "123456789012"
ROLE_NAME = "peagle-train-test"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/{ROLE_NAME}"
CALLER_ROLE = "peagle-train-caller"
BUCKET = "peagle-train-test"
INSTANCE = "ml.g6e.2xlarge"
JOB = "peagle-train-tiny-0a1b2c3d"
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "sagemaker.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}
ROLE_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject"],
            "Resource": f"arn:aws:s3:::{BUCKET}/*",
        },
        {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}"},
    ],
}
CALLER_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": ROLE,
            "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
        },
        {
            "Effect": "Allow",
            "Action": [
                "s3:*",
                "sagemaker:*",
                "iam:GetRole",
                "iam:SimulatePrincipalPolicy",
                "kms:*",
                "logs:*",
            ],
            "Resource": "*",
        },
    ],
}


def request(name: str = JOB, **changes: Any) -> dict[str, Any]:
    """A CreateTrainingJob request as the planner renders one (valid for botocore)."""
    base: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingImage": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/peagle-train:1",
            "TrainingInputMode": "File",
        },
        "RoleArn": ROLE,
        "HyperParameters": {"num_depths": "4", "num_layers": "1", "epochs": "1"},
        "InputDataConfig": [
            {
                "ChannelName": "target",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": f"s3://{BUCKET}/target/",
                        "S3DataDistributionType": "FullyReplicated",
                    }
                },
            },
            {
                "ChannelName": "data",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": f"s3://{BUCKET}/data/",
                        "S3DataDistributionType": "FullyReplicated",
                    }
                },
            },
        ],
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output", "CompressionType": "NONE"},
        "ResourceConfig": {"InstanceType": INSTANCE, "InstanceCount": 1, "VolumeSizeInGB": 200},
        "StoppingCondition": {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 10800},
        "EnableManagedSpotTraining": True,
        "CheckpointConfig": {"S3Uri": f"s3://{BUCKET}/checkpoints/{name}/"},
        "EnableNetworkIsolation": True,
        "EnableInterContainerTrafficEncryption": True,
        "Tags": [{"Key": "peagle:stage", "Value": "dev"}],
    }
    base.update(changes)
    return base


def plan(**changes: Any) -> TrainingPlan:
    req = request(**changes)
    name = req["TrainingJobName"]
    return TrainingPlan(
        job_name=name,
        request=req,
        drafter_uri=f"s3://{BUCKET}/output/{name}/output/model/drafter/",
        num_speculative_tokens=4,
        cost=TrainingCost(INSTANCE, 1, 2.0, 2.0, True),
    )


def metadata_text(num_depths: int = 4) -> str:
    """The metadata file the driver writes, through the contract's own writer."""
    from peagle_train.contract import DrafterMetadata, metadata_to_json

    acceptance = tuple(round(0.9 - 0.15 * i, 2) for i in range(num_depths))
    return metadata_to_json(
        DrafterMetadata(
            schema_version=1,
            serving_format="speculators",
            num_depths=num_depths,
            num_layers=1,
            mask_token_id=128002,
            draft_vocab_size=32000,
            target_model_type="llama",
            target_hidden_size=4096,
            aux_layer_ids=(2, 16, 29),
            acceptance_per_position=acceptance,
            mean_accepted_per_step=round(sum(acceptance), 2),
            held_out_prompts=32,
            data_sha256="0" * 64,
            versions={"speculators": "0.9.0", "vllm": "0.30.0"},
        )
    )


COMPLETED = [
    ("InProgress", "Starting", "Preparing the instances for training"),
    ("InProgress", "Downloading", "Downloading the training image"),
    ("InProgress", "Training", "Training image download completed. Training in progress."),
    ("InProgress", "Uploading", "Uploading generated training model"),
    ("Completed", "Completed", "Training job completed"),
]


def failing(reason: str) -> list[tuple[str, str, str]]:
    return [*COMPLETED[:3], ("Failed", "Failed", reason)]


STOPPING = ("Stopping", "Stopping", "Stopping the training job")
STOPPED = ("Stopped", "Stopped", "The job was stopped")


@dataclass
class _Job:
    request: dict[str, Any]
    script: list[tuple[str, str, str]]
    step: int = -1
    stopping: int = 0
    """1: StopTrainingJob was called; 2: it showed Stopping once (then Stopped)."""
    transitions: list[dict[str, Any]] = field(default_factory=list)
    current: tuple[str, str, str] = ("InProgress", "Starting", "")
    created: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def advance(self) -> None:
        """One DescribeTrainingJob later: the next state of the script (or of a stop)."""
        if self.stopping:
            state = STOPPING if self.stopping == 1 else STOPPED
            self.stopping = 2
        elif self.step < len(self.script) - 1:
            self.step += 1
            state = self.script[self.step]
        else:
            return
        if not self.transitions or self.transitions[-1]["Status"] != state[1]:
            self.transitions.append(
                {"Status": state[1], "StartTime": self.created, "StatusMessage": state[2]}
            )
        self.current = state


class TrainingJobs:
    """SageMaker's training-job operations for one session (see the module doc)."""

    def __init__(self, session: Any) -> None:
        self.jobs: dict[str, _Job] = {}
        self.scripts: dict[str, list[tuple[str, str, str]]] = {}
        self.default_script = COMPLETED
        self.calls: list[tuple[str, dict[str, Any]]] = []
        for op in (
            "CreateTrainingJob",
            "DescribeTrainingJob",
            "StopTrainingJob",
            "ListTrainingJobs",
            "ListTags",
        ):
            session.events.register(f"before-call.sagemaker.{op}", self._handler(op))

    def _handler(self, op: str) -> Any:
        def handle(params: Mapping[str, Any], **_: Any) -> Any:
            body = json.loads(params.get("body") or b"{}")
            if op == "ListTags" and ":training-job/" not in body.get("ResourceArn", ""):
                return None  # moto's
            self.calls.append((op, body))
            return getattr(self, f"_{op}")(body)

        return handle

    @staticmethod
    def _ok(parsed: dict[str, Any]) -> Any:
        from botocore.awsrequest import AWSResponse

        return AWSResponse("https://sagemaker.test", 200, {}, None), parsed

    @staticmethod
    def _error(code: str, message: str) -> Any:
        from botocore.awsrequest import AWSResponse

        parsed = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return AWSResponse("https://sagemaker.test", 400, {}, None), parsed

    def arn(self, name: str) -> str:
        return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name.lower()}"

    def _CreateTrainingJob(self, body: dict[str, Any]) -> Any:  # noqa: N802
        name = body["TrainingJobName"]
        if name in self.jobs:
            return self._error(
                "ResourceInUse",
                f"Training job names must be unique within an "
                f"AWS account and region, and a training job with this name "
                f"already exists ({self.arn(name)})",
            )
        self.jobs[name] = _Job(body, list(self.scripts.get(name, self.default_script)))
        return self._ok({"TrainingJobArn": self.arn(name)})

    def _DescribeTrainingJob(self, body: dict[str, Any]) -> Any:  # noqa: N802
        job = self.jobs.get(body["TrainingJobName"])
        if job is None:
            return self._error("ValidationException", "Requested resource not found.")
        job.advance()
        status, secondary, message = job.current
        described = {k: copy.deepcopy(v) for k, v in job.request.items() if k != "Tags"}
        described |= {
            "TrainingJobArn": self.arn(body["TrainingJobName"]),
            "TrainingJobStatus": status,
            "SecondaryStatus": secondary,
            "SecondaryStatusTransitions": copy.deepcopy(job.transitions),
            "CreationTime": job.created,
        }
        described["AlgorithmSpecification"]["EnableSageMakerMetricsTimeSeries"] = False
        if status == "Failed":
            described["FailureReason"] = message
        if status in ("Completed", "Failed", "Stopped"):
            described |= {"TrainingTimeInSeconds": 3000, "BillableTimeInSeconds": 1200}
        return self._ok(described)

    def _StopTrainingJob(self, body: dict[str, Any]) -> Any:  # noqa: N802
        job = self.jobs.get(body["TrainingJobName"])
        if job is None:
            return self._error("ValidationException", "Requested resource not found.")
        if job.current[0] != "InProgress":
            return self._error("ValidationException", f"The job is {job.current[0]}.")
        job.stopping = 1
        return self._ok({})

    def _ListTrainingJobs(self, body: dict[str, Any]) -> Any:  # noqa: N802
        wanted = body.get("StatusEquals")
        summaries = [
            {
                "TrainingJobName": n,
                "TrainingJobArn": self.arn(n),
                "CreationTime": j.created,
                "TrainingJobStatus": j.current[0],
            }
            for n, j in self.jobs.items()
            if wanted is None or j.current[0] == wanted
        ]
        return self._ok({"TrainingJobSummaries": summaries})

    def _ListTags(self, body: dict[str, Any]) -> Any:  # noqa: N802
        for name, job in self.jobs.items():
            if self.arn(name) == body["ResourceArn"]:
                return self._ok({"Tags": job.request.get("Tags", [])})
        return self._error("ValidationException", "Requested resource not found.")

    def operations(self) -> list[str]:
        return [op for op, _ in self.calls]


@dataclass
class Account:
    session: Any
    jobs: TrainingJobs
    quotas: AccountExtensions

    def client(self, service: str) -> Any:
        return self.session.client(service, region_name=REGION)


def caller_session(name: str = CALLER_ROLE, policy: Mapping[str, Any] = CALLER_POLICY) -> Any:
    """A session of a role `name` with `policy` (the doctor asks the simulator about it)."""
    iam = boto3.client("iam", region_name=REGION)
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(TRUST))
    iam.put_role_policy(RoleName=name, PolicyName="caller", PolicyDocument=json.dumps(policy))
    creds = boto3.client("sts", region_name=REGION).assume_role(
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{name}", RoleSessionName="train-test"
    )["Credentials"]
    return boto3.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=REGION,
    )


def stage(account_quota: float = 1.0, *, chat_template: bool = True) -> None:
    """What a training job needs: the role, the bucket with target and data, the quota."""
    iam = boto3.client("iam", region_name=REGION)
    iam.create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps(TRUST))
    iam.put_role_policy(
        RoleName=ROLE_NAME, PolicyName="train", PolicyDocument=json.dumps(ROLE_POLICY)
    )
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="target/config.json", Body=b'{"model_type": "llama"}')
    s3.put_object(Bucket=BUCKET, Key="target/model.safetensors", Body=b"weights")
    tokenizer = {"chat_template": "{{ messages }}"} if chat_template else {}
    s3.put_object(
        Bucket=BUCKET, Key="target/tokenizer_config.json", Body=json.dumps(tokenizer).encode()
    )
    s3.put_object(Bucket=BUCKET, Key="data/chat.jsonl", Body=b'{"messages": []}\n')


@pytest.fixture(name="account")
def account_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Account]:
    """moto in-process, staged for the test plan, with a caller that is a role session."""
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    from peagle_deploy.train import progress

    monkeypatch.setattr(progress, "_sleep", lambda _s: None)
    with mock_aws(), AccountExtensions() as quotas:
        stage()
        quotas.set_quota("sagemaker", f"{INSTANCE} for spot training job usage", 1)
        session = caller_session()
        yield Account(session, TrainingJobs(session), quotas)


def put_metadata(job: str = JOB, text: str | None = None) -> None:
    from peagle_train.contract import METADATA_FILE

    boto3.client("s3", region_name=REGION).put_object(
        Bucket=BUCKET,
        Key=f"output/{job}/output/model/drafter/{METADATA_FILE}",
        Body=(text if text is not None else metadata_text()).encode(),
    )
