"""Run every check of a plan concurrently and collect one report.

Each check is a few read-only AWS calls (Get/List/Describe/Head, ranged GETs,
iam:SimulatePrincipalPolicy, bucket/key/repository policies), so they run on worker
threads (`workers.run_all`: Ctrl-C returns at once, stalled reads are not waited for);
the wall time is about the slowest check's. A check that raises is reported as
could-not-check, never as a pass.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from peagle_deploy.doctor import artifacts, caller, capacity, image, role
from peagle_deploy.doctor.coming import DEPLOY, ComingRun
from peagle_deploy.doctor.context import DoctorContext, short_error
from peagle_deploy.doctor.result import CheckResult, DoctorReport, warned
from peagle_deploy.doctor.workers import run_all
from peagle_deploy.plan import Plan

Check = Callable[[DoctorContext], list[CheckResult]]

CHECKS: tuple[tuple[str, Check], ...] = (
    ("model-data", artifacts.check_model_data),
    ("drafter", artifacts.check_drafter),
    ("role.trust", role.check_role),
    ("role.s3", role.check_s3_access),
    ("role.ecr", role.check_image_pull),
    ("role.kms", role.check_kms),
    ("capacity.quota", capacity.check_quota),
    ("image.exists", image.check_image),
    (caller.CHECK, caller.check_caller),
)
MAX_WORKERS = 8


def _safely(name: str, check: Check, ctx: DoctorContext) -> list[CheckResult]:
    try:
        return check(ctx)
    except Exception as exc:  # one broken check must not hide the others
        return [warned(name, ctx.plan.endpoint_name, f"could not check: {short_error(exc)}")]


def _notes(results: list[CheckResult]) -> list[str]:
    """What no check can see, said once."""
    decided = [
        r
        for r in results
        if r.check.startswith("role.") and not r.detail.startswith("could not check")
    ]
    return [role.SCP_NOTE] if decided else []


def run_doctor(
    plan: Plan,
    *,
    boto_session: Any = None,
    role_view: Any = None,
    coming: ComingRun = DEPLOY,
) -> DoctorReport:
    """Every check's result for `plan` (read-only; needs credentials, never write access).

    `role_view` (doctor.role.RoleView): the role SageMaker will run as, when it is not the
    plan's (a CDK stage's own role). `coming`: the run the doctor goes before (a deploy of
    the plan, a promotion, an experiment start, a CDK deploy), whose calls
    `caller.permissions` asks about. Missing credentials or region raise before any check
    runs (botocore's errors). Ctrl-C raises KeyboardInterrupt at once.
    """
    from peagle_deploy.aws import make_session

    started = time.perf_counter()
    ctx = DoctorContext(
        plan, make_session(plan.region, boto_session), role=role_view, coming=coming
    )
    _ = ctx.account_id  # no credentials: fail once, here, not in every check
    tasks = [functools.partial(_safely, name, check, ctx) for name, check in CHECKS]
    try:
        lines = run_all(tasks, workers=MAX_WORKERS, name="peagle-doctor")
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"interrupted: doctor stopped checking {plan.endpoint_name}; nothing was created"
        ) from None
    results = [result for found in lines for result in found]
    return DoctorReport(
        endpoint_name=plan.endpoint_name,
        region=plan.region,
        results=results,
        elapsed_s=time.perf_counter() - started,
        notes=_notes(results),
    )
