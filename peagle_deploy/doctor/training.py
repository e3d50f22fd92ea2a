"""`peagle train`'s doctor: read-only checks of a CreateTrainingJob request before it is sent.

What SageMaker would report minutes into a job (a quota of 0 for the instance type, a
target without its config or chat template, a role that cannot write the output or
that the caller may not pass, a disabled KMS key) is visible from the account first.
The checks take the request itself (`TrainingPlan.request`), so this module needs
nothing above the doctor's layer; they run concurrently on the doctor's workers and
report in its shapes (`CheckResult`, `DoctorReport`).

- `training.quota`: Service Quotas, service code `sagemaker`, quota
  `<instance type> for training job usage` (`... for spot training job usage` for a
  managed spot job), against the instances of that type the account's running training
  jobs hold (ListTrainingJobs StatusEquals=InProgress, DescribeTrainingJob).
- `training.target` / `training.data`: the caller reads the channels' S3 prefixes
  (ListObjectsV2): the target holds config.json and a chat template (chat_template.jinja,
  chat_template.json, or `chat_template` in tokenizer_config.json); the data holds JSONL.
- `training.role`: the role exists and trusts sagemaker.amazonaws.com (GetRole);
  the caller may pass it to SageMaker (iam:PassRole with iam:PassedToService, asked of
  the policy simulator for the caller's role).
- `training.role.s3`: the role's own policies allow reading the channels and writing
  the output and checkpoints (iam:SimulatePrincipalPolicy: writing cannot be tested
  without writing). Bucket policies are not read here.
- `training.kms`: each KMS key the request names is Enabled (DescribeKey).
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from peagle_deploy.doctor.capacity import MAX_QUOTA_PAGES, PAGE_SIZE, PagesExhaustedError
from peagle_deploy.doctor.context import could_not_check, error_code, short_error
from peagle_deploy.doctor.gate import DoctorFailedError
from peagle_deploy.doctor.result import CheckResult, DoctorReport, failed, passed, warned
from peagle_deploy.doctor.workers import run_all
from peagle_deploy.errors import DeployError

SERVICE_CODE: Final = "sagemaker"
SAGEMAKER_PRINCIPAL: Final = "sagemaker.amazonaws.com"
CHAT_TEMPLATE_FILES: Final = ("chat_template.jinja", "chat_template.json")
TOKENIZER_CONFIG: Final = "tokenizer_config.json"
MAX_TOKENIZER_CONFIG_BYTES: Final = 8 << 20
MAX_KEYS_LISTED: Final = 1000
MAX_RUNNING_JOBS: Final = 200
"""Running training jobs looked at for quota usage; beyond, usage is a warning."""
MAX_LIST_PAGES: Final = 20
"""ListTrainingJobs pages read: pages that keep coming empty end here, as a warning."""
DESCRIBE_WORKERS: Final = 8


class TrainingDoctorFailedError(DoctorFailedError):
    """A check found what would fail the training job; no job was created."""

    def __init__(self, report: DoctorReport) -> None:
        # DoctorFailedError's own text speaks of a deployment; this one of the job.
        self.report = report
        lines = [r.line() for r in report.failures]
        DeployError.__init__(
            self,
            f"doctor: {len(report.failures)} check(s) would fail training job "
            f"{report.endpoint_name}; no job was created (skip with --no-doctor / "
            "doctor=False):\n  " + "\n  ".join(lines),
        )


def quota_name(instance_type: str, *, spot: bool) -> str:
    kind = "spot training job usage" if spot else "training job usage"
    return f"{instance_type} for {kind}"


@dataclass
class TrainingContext:
    """What the checks share: the request, a session, clients made once under a lock."""

    request: Mapping[str, Any]
    session: Any
    region: str
    expected_bucket_owner: str | None = None
    _clients: dict[str, Any] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _identity: dict[str, Any] | None = field(default=None, init=False)

    @property
    def job_name(self) -> str:
        return str(self.request.get("TrainingJobName", ""))

    @property
    def role_arn(self) -> str:
        return str(self.request.get("RoleArn", ""))

    def client(self, service: str) -> Any:
        from peagle_deploy.aws import client_config

        with self._lock:
            if service not in self._clients:
                self._clients[service] = self.session.client(
                    service,
                    region_name=self.region,
                    config=client_config(retries={"mode": "standard", "total_max_attempts": 3}),
                )
            return self._clients[service]

    @property
    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            self._identity = dict(self.client("sts").get_caller_identity())
        return self._identity

    @property
    def owner(self) -> str:
        return self.expected_bucket_owner or str(self.identity["Account"])


def _s3_parts(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _channels(ctx: TrainingContext) -> dict[str, str]:
    return {
        str(c.get("ChannelName")): str(c["DataSource"]["S3DataSource"]["S3Uri"])
        for c in ctx.request.get("InputDataConfig") or []
        if (c.get("DataSource") or {}).get("S3DataSource")
    }


# --- training.quota -------------------------------------------------------------------------


def _find_quota(ctx: TrainingContext, name: str) -> tuple[dict[str, Any] | None, str]:
    client = ctx.client("service-quotas")
    for operation, source in (
        ("list_service_quotas", "applied"),
        ("list_aws_default_service_quotas", "AWS default"),
    ):
        pages = client.get_paginator(operation).paginate(
            ServiceCode=SERVICE_CODE, PaginationConfig={"PageSize": PAGE_SIZE}
        )
        for number, page in enumerate(pages, start=1):
            for quota in page.get("Quotas", []):
                if quota.get("QuotaName") == name:
                    return quota, source
            if number >= MAX_QUOTA_PAGES and page.get("NextToken"):
                raise PagesExhaustedError(f"Service Quotas still paging after {number} pages")
    return None, ""


def _held(ctx: TrainingContext, name: str, instance_type: str, spot: bool) -> int:
    job = ctx.client("sagemaker").describe_training_job(TrainingJobName=name)
    resources = job.get("ResourceConfig") or {}
    same_kind = bool(job.get("EnableManagedSpotTraining")) == spot
    if resources.get("InstanceType") != instance_type or not same_kind:
        return 0
    return int(resources.get("InstanceCount") or 0)


def running_instances(ctx: TrainingContext, instance_type: str, *, spot: bool) -> int:
    """Instances of the type that the account's running training jobs of the same kind
    (spot or on-demand) hold, this job's own name aside."""
    names: list[str] = []
    pages = ctx.client("sagemaker").get_paginator("list_training_jobs")
    for number, page in enumerate(
        pages.paginate(StatusEquals="InProgress", PaginationConfig={"PageSize": 100}), start=1
    ):
        names += [str(j["TrainingJobName"]) for j in page.get("TrainingJobSummaries", [])]
        if len(names) > MAX_RUNNING_JOBS:
            raise RuntimeError(f"more than {MAX_RUNNING_JOBS} running training jobs to count")
        if number >= MAX_LIST_PAGES and page.get("NextToken"):
            raise PagesExhaustedError(f"ListTrainingJobs still paging after {number} pages")
    held = run_all(
        [
            functools.partial(_held, ctx, name, instance_type, spot)
            for name in names
            if name != ctx.job_name
        ],
        workers=DESCRIBE_WORKERS,
        name="peagle-train-doctor-usage",
    )
    return sum(held)


def check_quota(ctx: TrainingContext) -> list[CheckResult]:
    resources = ctx.request.get("ResourceConfig") or {}
    instance_type = str(resources.get("InstanceType"))
    count = int(resources.get("InstanceCount") or 1)
    spot = bool(ctx.request.get("EnableManagedSpotTraining"))
    name = quota_name(instance_type, spot=spot)
    resource = f"{SERVICE_CODE} quota '{name}' ({ctx.region})"
    try:
        quota, source = _find_quota(ctx, name)
    except Exception as exc:
        return [
            could_not_check(
                "training.quota",
                resource,
                exc,
                denied="the caller may not read Service Quotas",
                fix="grant the caller servicequotas:ListServiceQuotas and "
                "servicequotas:ListAWSDefaultServiceQuotas",
                failed="Service Quotas did not list SageMaker's quotas",
            )
        ]
    if quota is None:
        return [
            failed(
                "training.quota",
                resource,
                f"no such quota: {instance_type} is not offered for SageMaker "
                f"{'spot ' if spot else ''}training in {ctx.region}",
                "pick an instance type SageMaker training offers in the region",
            )
        ]
    return [_quota_covers(ctx, resource, quota, source, (instance_type, count, spot))]


def _quota_covers(
    ctx: TrainingContext,
    resource: str,
    quota: Mapping[str, Any],
    source: str,
    need: tuple[str, int, bool],
) -> CheckResult:
    instance_type, count, spot = need
    value = float(quota.get("Value", 0))
    try:
        in_use: int | None = running_instances(ctx, instance_type, spot=spot)
    except Exception as exc:
        in_use = None
        problem = error_code(exc) or short_error(exc)
    held = in_use or 0
    if value < held + count:
        code = quota.get("QuotaCode", "<quota code>")
        return failed(
            "training.quota",
            resource,
            f"the {source} quota is {value:g} instances; the job needs {count}"
            + (f" beside the {held} running training jobs hold" if held else ""),
            f"aws service-quotas request-service-quota-increase --region {ctx.region} "
            f"--service-code {SERVICE_CODE} --quota-code {code} --desired-value {held + count}",
        )
    if in_use is None:
        return warned(
            "training.quota",
            resource,
            f"{source} quota {value:g} covers {count} instance(s), but the running "
            f"training jobs could not be counted ({problem})",
            "grant the caller sagemaker:ListTrainingJobs and sagemaker:DescribeTrainingJob",
        )
    return passed(
        "training.quota",
        resource,
        f"{source} quota {value:g} covers {count} instance(s) ({held} held by running jobs)",
    )


# --- training.target / training.data --------------------------------------------------------


def _keys(ctx: TrainingContext, uri: str) -> list[str]:
    bucket, prefix = _s3_parts(uri)
    page = ctx.client("s3").list_objects_v2(
        Bucket=bucket, Prefix=prefix, MaxKeys=MAX_KEYS_LISTED, ExpectedBucketOwner=ctx.owner
    )
    return [str(o["Key"])[len(prefix) :].lstrip("/") for o in page.get("Contents", [])]


def _has_template_in_tokenizer_config(ctx: TrainingContext, uri: str) -> bool:
    bucket, prefix = _s3_parts(uri)
    key = f"{prefix.rstrip('/')}/{TOKENIZER_CONFIG}" if prefix else TOKENIZER_CONFIG
    body = ctx.client("s3").get_object(
        Bucket=bucket,
        Key=key,
        Range=f"bytes=0-{MAX_TOKENIZER_CONFIG_BYTES - 1}",
        ExpectedBucketOwner=ctx.owner,
    )["Body"]
    try:
        config = json.loads(body.read(MAX_TOKENIZER_CONFIG_BYTES))
    except ValueError:
        return False
    return isinstance(config, dict) and bool(config.get("chat_template"))


def _read_prefix(
    ctx: TrainingContext, check: str, uri: str, judge: Callable[[list[str]], CheckResult]
) -> list[CheckResult]:
    try:
        keys = _keys(ctx, uri)
    except Exception as exc:
        if error_code(exc) == "NoSuchBucket":
            return [failed(check, uri, "the bucket does not exist", "fix the S3 location")]
        return [
            could_not_check(
                check,
                uri,
                exc,
                denied="the caller may not list the prefix",
                fix=f"grant the caller s3:ListBucket on {uri}",
                failed="ListObjectsV2 failed",
            )
        ]
    if not keys:
        return [failed(check, uri, "no object under this prefix", "upload it, or fix the URI")]
    return [judge(keys)]


def check_target(ctx: TrainingContext) -> list[CheckResult]:
    uri = _channels(ctx).get("target")
    if uri is None:
        return [failed("training.target", ctx.job_name, "no `target` channel", "plan it again")]

    def judge(keys: list[str]) -> CheckResult:
        if "config.json" not in keys:
            return failed(
                "training.target",
                uri,
                "no config.json: not a Hugging Face model folder",
                "point model_data_uri at the folder holding config.json and the weights",
            )
        if any(k in keys for k in CHAT_TEMPLATE_FILES) or (
            TOKENIZER_CONFIG in keys and _has_template_in_tokenizer_config(ctx, uri)
        ):
            return passed("training.target", uri, "config.json and a chat template present")
        return failed(
            "training.target",
            uri,
            "no chat template (chat_template.jinja, chat_template.json, or `chat_template` "
            "in tokenizer_config.json): the training conversations cannot be rendered",
            "save the tokenizer with its chat template beside the weights",
        )

    return _read_prefix(ctx, "training.target", uri, judge)


def check_data(ctx: TrainingContext) -> list[CheckResult]:
    uri = _channels(ctx).get("data")
    if uri is None:
        return [failed("training.data", ctx.job_name, "no `data` channel", "plan it again")]

    def judge(keys: list[str]) -> CheckResult:
        found = [k for k in keys if k.endswith((".jsonl", ".json", ".jsonl.gz"))]
        if not found:
            return failed(
                "training.data",
                uri,
                "no .jsonl file under the prefix",
                "upload the chat conversations as JSONL (one conversation per line)",
            )
        return passed("training.data", uri, f"{len(found)} JSONL file(s) readable")

    return _read_prefix(ctx, "training.data", uri, judge)


# --- training.role / training.role.s3 -------------------------------------------------------


def _simulated_lines(
    ctx: TrainingContext, check: str, principal: str, asks: list[Any], why: str
) -> list[CheckResult]:
    """One failed line per ask the principal's policies deny, a warning per ask they
    decide only with a context key doctor cannot know, else one pass line."""
    from peagle_deploy.doctor.simulation import simulate

    try:
        sides = simulate(ctx.client("iam"), principal, asks)
    except Exception as exc:
        return [
            could_not_check(
                check,
                principal,
                exc,
                denied=f"the caller may not simulate {principal}'s policies",
                fix=f"grant the caller iam:SimulatePrincipalPolicy on {principal}",
                failed="the policy simulator did not answer",
            )
        ]
    lines: list[CheckResult] = []
    for ask in asks:
        side = sides.get(ask)
        where = f"{ask.action} on {ask.resource}"
        if side is None or side.allowed is None:
            missing = ", ".join(side.missing_keys) if side is not None else "no answer"
            lines.append(warned(check, principal, f"{where}: could not decide without {missing}"))
        elif not side.allowed:
            lines.append(
                failed(
                    check,
                    principal,
                    f"IAM denies {where}" + (" (explicit Deny)" if side.denied else ""),
                    f"grant {ask.action} on {ask.resource} to {principal}",
                )
            )
    return lines or [passed(check, principal, why)]


def check_role(ctx: TrainingContext) -> list[CheckResult]:
    from peagle_deploy.doctor.role import _trusts_sagemaker, role_name

    arn = ctx.role_arn
    try:
        role = ctx.client("iam").get_role(RoleName=role_name(arn))["Role"]
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":
            return [failed("training.role", arn, "the role does not exist", "fix role_arn")]
        return [
            could_not_check(
                "training.role",
                arn,
                exc,
                denied="the caller may not call iam:GetRole",
                fix=f"grant the caller iam:GetRole on {arn}",
                failed="GetRole failed",
            )
        ]
    if str(role.get("Arn")) != arn:
        return [failed("training.role", arn, f"the role is {role.get('Arn')}", "use its ARN")]
    if not _trusts_sagemaker(role.get("AssumeRolePolicyDocument", {})):
        return [
            failed(
                "training.role",
                arn,
                f"the trust policy does not let {SAGEMAKER_PRINCIPAL} assume the role",
                f"allow sts:AssumeRole to the service principal {SAGEMAKER_PRINCIPAL}",
            )
        ]
    return [passed("training.role", arn, f"exists and trusts {SAGEMAKER_PRINCIPAL}")]


def _objects_arn(uri: str) -> str:
    """The objects under an S3 prefix, as a policy names them (`<bucket>/<prefix>/*`):
    SageMaker reads and writes keys below the prefix, never the prefix itself."""
    bucket, key = _s3_parts(uri)
    return (
        f"arn:aws:s3:::{bucket}/{key.rstrip('/')}/*"
        if key.strip("/")
        else f"arn:aws:s3:::{bucket}/*"
    )


def check_role_s3(ctx: TrainingContext) -> list[CheckResult]:
    """The role's policies let it read the channels and write output and checkpoints."""
    from peagle_deploy.doctor.simulation import Ask

    asks = [Ask("s3:GetObject", _objects_arn(uri)) for uri in _channels(ctx).values()]
    asks += [
        Ask(
            "s3:ListBucket",
            f"arn:aws:s3:::{_s3_parts(uri)[0]}",
            (("s3:prefix", _s3_parts(uri)[1]),),
        )
        for uri in _channels(ctx).values()
    ]
    output = (ctx.request.get("OutputDataConfig") or {}).get("S3OutputPath")
    writes = [
        # the job writes its output under <S3OutputPath>/<job>/ (contract.drafter_uri)
        f"{str(output).rstrip('/')}/{ctx.job_name}" if output else None,
        (ctx.request.get("CheckpointConfig") or {}).get("S3Uri"),
    ]
    asks += [Ask("s3:PutObject", _objects_arn(str(uri))) for uri in writes if uri]
    return _simulated_lines(
        ctx,
        "training.role.s3",
        ctx.role_arn,
        asks,
        "its policies allow reading the channels and writing the output and checkpoints",
    )


# --- training.kms ---------------------------------------------------------------------------


def _kms_keys(ctx: TrainingContext) -> list[str]:
    request = ctx.request
    keys = [
        (request.get("OutputDataConfig") or {}).get("KmsKeyId"),
        (request.get("ResourceConfig") or {}).get("VolumeKmsKeyId"),
    ]
    return sorted({str(k) for k in keys if k})


def check_kms(ctx: TrainingContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    for key in _kms_keys(ctx):
        try:
            meta = ctx.client("kms").describe_key(KeyId=key)["KeyMetadata"]
        except Exception as exc:
            if error_code(exc) == "NotFoundException":
                results.append(failed("training.kms", key, "no such key", "fix the key ARN"))
                continue
            results.append(
                could_not_check(
                    "training.kms",
                    key,
                    exc,
                    denied="the caller may not call kms:DescribeKey",
                    fix=f"grant the caller kms:DescribeKey on {key}",
                    failed="DescribeKey failed",
                )
            )
            continue
        state = str(meta.get("KeyState"))
        if state != "Enabled" or meta.get("KeyUsage", "ENCRYPT_DECRYPT") != "ENCRYPT_DECRYPT":
            results.append(
                failed(
                    "training.kms",
                    key,
                    f"the key is {state} ({meta.get('KeyUsage')}): SageMaker cannot use it",
                    "enable the key, or name another",
                )
            )
        else:
            results.append(passed("training.kms", key, "enabled, for encryption"))
    return results


# --- caller.permissions -----------------------------------------------------------------------


def start_calls(ctx: TrainingContext) -> list[tuple[str, str, dict[str, Any]]]:
    """The calls `peagle train start` makes that need a permission: the job's creation
    (with its iam:PassRole and tag-on-create AddTags), watching it, reading its drafter's
    metadata back."""
    from peagle_train.contract import METADATA_FILE, drafter_uri

    name = ctx.job_name
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("sagemaker", "CreateTrainingJob", dict(ctx.request)),
        ("sagemaker", "DescribeTrainingJob", {"TrainingJobName": name}),
    ]
    output = (ctx.request.get("OutputDataConfig") or {}).get("S3OutputPath")
    if output:
        bucket, key = _s3_parts(drafter_uri(str(output), name) + METADATA_FILE)
        calls.append(("s3", "GetObject", {"Bucket": bucket, "Key": key}))
    return calls


def _role_tags(ctx: TrainingContext) -> dict[str, dict[str, str]]:
    """The training role's tags (IAM decides iam:PassRole on `aws:ResourceTag/*`)."""
    from peagle_deploy.doctor.role import role_name

    try:
        role = ctx.client("iam").get_role(RoleName=role_name(ctx.role_arn))["Role"]
    except Exception:
        return {}  # not readable: the line then names the key it could not decide without
    return {ctx.role_arn: {str(t["Key"]): str(t["Value"]) for t in role.get("Tags") or []}}


def check_caller(ctx: TrainingContext) -> list[CheckResult]:
    """The caller's own policies allow every request of the start (asked of IAM's policy
    simulator for a role session, as `peagle doctor` asks for a deploy: doctor.caller)."""
    from peagle_deploy.catalog.iam_calls import Where, distinct, iam_requests
    from peagle_deploy.doctor import caller
    from peagle_deploy.doctor.simulation import decided, simulate
    from peagle_deploy.validation.aws_shapes import partition_of

    principal = caller.caller_principal(str(ctx.identity.get("Arn", "")))
    if principal is None or ":role/" not in principal:
        return []  # as for a deploy: only a role session is asked (docs/doctor.md)
    where = Where(ctx.region, str(ctx.identity["Account"]), partition_of(ctx.region))
    requests = distinct([r for c in start_calls(ctx) for r in iam_requests(*c, where)])
    role_tags = _role_tags(ctx)
    asks = caller._asks(requests, role_tags)
    try:
        sides = simulate(ctx.client("iam"), principal, list(asks), caller._key_types(asks))
    except Exception as exc:
        return [
            could_not_check(
                caller.CHECK,
                principal,
                exc,
                denied=f"the caller may not simulate its own policies ({principal})",
                fix=f"grant iam:SimulatePrincipalPolicy on {principal} to itself",
                failed="the policy simulator did not answer",
            )
        ]
    sides = {a: decided(side, caller._known_absent(a, role_tags)) for a, side in sides.items()}
    return caller._results(principal, asks, sides, "peagle train start")


# --- the run --------------------------------------------------------------------------------

Check = Callable[[TrainingContext], list[CheckResult]]
CHECKS: Final[tuple[tuple[str, Check], ...]] = (
    ("training.quota", check_quota),
    ("training.target", check_target),
    ("training.data", check_data),
    ("training.role", check_role),
    ("training.role.s3", check_role_s3),
    ("training.kms", check_kms),
    ("caller.permissions", check_caller),
)


def _safely(name: str, check: Check, ctx: TrainingContext) -> list[CheckResult]:
    try:
        return check(ctx)
    except Exception as exc:  # one broken check must not hide the others
        return [warned(name, ctx.job_name, f"could not check: {short_error(exc)}")]


def run_training_doctor(
    request: Mapping[str, Any],
    *,
    region: str,
    boto_session: Any = None,
    expected_bucket_owner: str | None = None,
) -> DoctorReport:
    """Every check's result for a CreateTrainingJob `request` (read-only)."""
    from peagle_deploy.aws import make_session

    started = time.perf_counter()
    ctx = TrainingContext(
        request, make_session(region, boto_session), region, expected_bucket_owner
    )
    _ = ctx.identity  # no credentials: fail once, here
    tasks = [functools.partial(_safely, name, check, ctx) for name, check in CHECKS]
    try:
        found = run_all(tasks, workers=len(tasks), name="peagle-train-doctor")
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"interrupted: doctor stopped checking {ctx.job_name}; nothing was created"
        ) from None
    return DoctorReport(
        endpoint_name=ctx.job_name,
        region=region,
        results=[r for lines in found for r in lines],
        elapsed_s=time.perf_counter() - started,
        notes=["bucket and key policies are not read: the role's own policies decide here"],
    )
