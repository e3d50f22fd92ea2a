"""`peagle doctor --stage NAME`: the pre-flight of `cdk deploy PeagleEndpoint-NAME`.

The plan is the one `cdk synth` builds for the stage: cdk.json's `peagle:stages`
context read by `peagle_deploy.stages.stage_configs`, then `StageConfig.plan()`, the same call
`infra.stack.PeagleStack` makes. The execution role is the stack's own (infra/role.py):
its side of every decision is the role's planned policy (`access.model_access_policy`),
evaluated by doctor; when the stack exists already, its `ExecutionRoleArn` output names
the role, so bucket, key and repository policies that name it are matched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from peagle_deploy.errors import InputError

CDK_JSON = "cdk.json"
ROLE_OUTPUT = "ExecutionRoleArn"
"""The stack output that names the execution role (infra/stack.py)."""


def stage_plan(name: str, app_dir: Path) -> tuple[Any, Any]:
    """(StageConfig, Plan) of stage `name` of the CDK app in `app_dir`."""
    from peagle_deploy.documents import load_mapping
    from peagle_deploy.stages import STAGES_CONTEXT_KEY, stage_configs

    path = app_dir / CDK_JSON
    if not path.is_file():
        raise InputError(
            "--stage",
            f"no {CDK_JSON} in {app_dir}: a stage is read from the CDK app's {CDK_JSON}",
            "run in the CDK app's directory, or give MODEL / --file to check a spec",
        )
    document = load_mapping(path, CDK_JSON, fmt="json")
    context = document.get("context") or {}
    stages = {s.name: s for s in stage_configs(context.get(STAGES_CONTEXT_KEY), app_dir)}
    if name not in stages:
        raise InputError("--stage", f"{name!r} is not a stage of {CDK_JSON}", sorted(stages))
    stage = stages[name]
    return stage, stage.plan()


def declared_experiment(stage: Any, experiment: dict[str, Any] | None) -> Any:
    """What the stage's template declares of its experiment: the shadow experiment's name
    (None without one: a split experiment is the endpoint's config, not a resource) and the
    stage's `experiment_state` (`doctor.stage_experiment` judges the deploy with it)."""
    from peagle_deploy.doctor.stage_experiment import Declared
    from peagle_deploy.stages import STAGES_CONTEXT_KEY

    request = (experiment or {}).get("create_inference_experiment") or {}
    return Declared(
        name=request.get("Name"),
        state=stage.experiment_state,
        where=f"{STAGES_CONTEXT_KEY}.{stage.name}",
    )


def stack_role_arn(session: Any, region: str, stack_name: str) -> str | None:
    """The deployed stack's execution role, if the stack exists and may be read."""
    try:
        cfn = session.client("cloudformation", region_name=region)
        stacks = cfn.describe_stacks(StackName=stack_name).get("Stacks") or []
    except Exception:  # not deployed yet, or no cloudformation:DescribeStacks
        return None
    for output in (stacks[0].get("Outputs") or []) if stacks else []:
        if output.get("OutputKey") == ROLE_OUTPUT and str(output.get("OutputValue", "")):
            return str(output["OutputValue"])
    return None


def planned_role(plan: Any, session: Any, stack_name: str, account: str | None) -> Any:
    """The RoleView of the stack's execution role."""
    from peagle_deploy.access import model_access_policy
    from peagle_deploy.doctor.role import PlannedRole
    from peagle_deploy.validation.aws_shapes import partition_of

    policy = model_access_policy(
        plan.create_model,
        partition=partition_of(plan.region),
        model_data_kms_key_arns=plan.spec.model_data_kms_key_arns,
        owner=plan.spec.expected_bucket_owner or account,
    )
    return PlannedRole(policy, account, stack_role_arn(session, plan.region, stack_name))
