"""`peagle doctor --stage`: what the coming `cdk deploy` would do to a live experiment.

CloudFormation cannot run a stage's InferenceExperiment through every change
(docs/platform-facts.md, "CloudFormation and the InferenceExperiment"): the resource's
`Name` is create-only (and derived from the experiment's content), so a changed
experiment is a replacement, which CloudFormation creates on the same endpoint before it
deletes the running one; and the handler's delete stops a running experiment with
`Retain` for both variants, so a removed one leaves the candidate's fleet on the
endpoint. Neither shows at synth, which cannot read the account. This check asks
SageMaker which experiment is live on the stage's endpoint (whoever started it) and
compares it with the one the stage declares: a deploy that would remove or replace a
live experiment fails here, in one line, before CloudFormation is asked anything.

The caller needs `sagemaker:ListInferenceExperiments` and
`sagemaker:DescribeInferenceExperiment`; without them the line is a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from peagle_deploy.doctor.context import could_not_check
from peagle_deploy.doctor.result import CheckResult, failed, passed, warned

CHECK = "stage.experiment"
ACTIVE = frozenset({"Creating", "Created", "Updating", "Starting", "Running", "Stopping"})
"""InferenceExperiment statuses in which it holds, or is about to hold, the endpoint
(botocore's `InferenceExperimentStatus`; `Completed` and `Cancelled` are over)."""


@dataclass(frozen=True)
class Experiment:
    """An InferenceExperiment as SageMaker describes it."""

    name: str
    status: str


@dataclass(frozen=True)
class Declared:
    """What the stage's template says: its shadow experiment (None: none) and the
    stage's `experiment_state`, with the key that holds it (for the fix)."""

    name: str | None
    state: str
    where: str


def live_experiment(sm: Any, endpoint_name: str) -> Experiment | None:
    """The active experiment on `endpoint_name`, if any: ListInferenceExperiments pages,
    then DescribeInferenceExperiment of the active ones (a summary names no endpoint)."""
    token: str | None = None
    while True:
        page = sm.list_inference_experiments(**({"NextToken": token} if token else {}))
        for summary in page.get("InferenceExperiments", []):
            if summary.get("Status") not in ACTIVE:
                continue
            described = sm.describe_inference_experiment(Name=summary["Name"])
            if (described.get("EndpointMetadata") or {}).get("EndpointName") == endpoint_name:
                return Experiment(str(described["Name"]), str(described["Status"]))
        token = page.get("NextToken")
        if not token:
            return None


def described(sm: Any, name: str) -> Experiment | None:
    """The experiment of that name, None when SageMaker has none."""
    from peagle_deploy.aws import error_code

    try:
        answer = sm.describe_inference_experiment(Name=name)
    except Exception as exc:
        if error_code(exc) == "ResourceNotFound":
            return None
        raise
    return Experiment(str(answer["Name"]), str(answer["Status"]))


def judge(
    endpoint: str, declared: Declared, live: Experiment | None, own: Experiment | None
) -> CheckResult:
    """The verdict on the deploy (pure): `live` runs on the endpoint now, `own` is the
    stage's declared experiment as SageMaker knows it (None: it does not exist)."""
    stop_first = (
        f"deploy the stage with the experiment unchanged and {declared.where}.experiment_state: "
        "completed (or cancelled) first, then change it (`peagle experiment conclude` or "
        "`abort` for one `peagle experiment start` began)"
    )
    if live is not None and live.name != declared.name:
        what = (
            f"the stage declares {declared.name} instead: CloudFormation would create it on "
            "the same endpoint before deleting the live one"
            if declared.name
            else "the stage no longer declares it: CloudFormation's delete stops it keeping "
            "both variants, so the candidate's fleet would stay on the endpoint"
        )
        return failed(CHECK, endpoint, f"runs {live.name} ({live.status}); {what}", stop_first)
    if declared.name and declared.state != "running" and own is None:
        return failed(
            CHECK,
            endpoint,
            f"{declared.where}.experiment_state is {declared.state}, but {declared.name} does "
            "not exist: CloudFormation's create starts it whatever the state says",
            f"remove {declared.where}.experiment_state to start it, or remove experiment:",
        )
    if live is not None:
        doing = "keeps it" if declared.state == "running" else f"stops it ({declared.state})"
        return passed(CHECK, endpoint, f"runs {live.name} ({live.status}); the deploy {doing}")
    if declared.name and declared.state == "running" and own is not None:
        return warned(
            CHECK,
            endpoint,
            f"{declared.name} has ended ({own.status}): the stage's experiment runs nothing",
            f"remove experiment: from the stage (and {declared.where}.experiment_state)",
        )
    return passed(CHECK, endpoint, "no experiment runs on the endpoint")


def check_stage_experiment(
    session: Any, region: str, endpoint_name: str, declared: Declared
) -> CheckResult:
    """Read what runs on the endpoint and judge the deploy against it."""
    try:
        sm = session.client("sagemaker", region_name=region)
        live = live_experiment(sm, endpoint_name)
        own = described(sm, declared.name) if declared.name else None
    except Exception as exc:
        return could_not_check(
            CHECK,
            endpoint_name,
            exc,
            denied="the experiments on the endpoint may not be read",
            fix="allow sagemaker:ListInferenceExperiments and DescribeInferenceExperiment",
            failed="the experiments on the endpoint could not be read",
        )
    return judge(endpoint_name, declared, live, own)
