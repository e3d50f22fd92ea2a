"""Run every check of a plan concurrently and collect one report.

Each check is a few read-only AWS calls (Get/List/Describe/Head, ranged GETs,
iam:SimulatePrincipalPolicy), so they run in a thread pool; the wall time is about the
slowest check's. A check that raises is reported as could-not-check, never as a pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from peagle_deploy.doctor import artifacts, capacity, image, role
from peagle_deploy.doctor.context import DoctorContext, short_error
from peagle_deploy.doctor.result import CheckResult, DoctorReport, warned
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
)
MAX_WORKERS = 8


def _safely(name: str, check: Check, ctx: DoctorContext) -> list[CheckResult]:
    try:
        return check(ctx)
    except Exception as exc:  # one broken check must not hide the others
        return [warned(name, ctx.plan.endpoint_name, f"could not check: {short_error(exc)}")]


def run_doctor(plan: Plan, *, boto_session: Any = None) -> DoctorReport:
    """Every check's result for `plan` (read-only; needs credentials, never write access).

    Missing credentials or region raise before any check runs (botocore's errors).
    """
    from peagle_deploy.aws import make_session

    started = time.perf_counter()
    ctx = DoctorContext(plan, make_session(plan.region, boto_session))
    _ = ctx.account_id  # no credentials: fail once, here, not in every check
    with ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="peagle-doctor") as pool:
        futures = [pool.submit(_safely, name, check, ctx) for name, check in CHECKS]
        results = [result for future in futures for result in future.result()]
    return DoctorReport(
        endpoint_name=plan.endpoint_name,
        region=plan.region,
        results=results,
        elapsed_s=time.perf_counter() - started,
    )
