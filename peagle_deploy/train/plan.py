"""TrainingSpec -> TrainingPlan: resolve, check, render. No AWS call, no credentials.

    job = resolve_training(spec)     # every default filled, the target read (train.resolve)
    warnings = check_training(job)   # every rule once; InputError refuses (train.check)
    request = render_training(job)   # the exact, content-named request (train.render)

`peagle plan --file TRAIN_SPEC` prints `plan_document(plan)`; `peagle train start` sends
`plan.request` as it is.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from peagle_train.contract import drafter_uri

from peagle_deploy.train.check import check_training
from peagle_deploy.train.cost import training_cost
from peagle_deploy.train.render import output_path, render_training
from peagle_deploy.train.resolve import resolve_training
from peagle_deploy.train.result import TrainingPlan
from peagle_deploy.train.spec import TrainingSpec


def build_training_plan(spec: TrainingSpec) -> TrainingPlan:
    """Resolve, check and render `spec`; InputError (one line, the field named) on refusal."""
    job = resolve_training(spec)
    warnings = check_training(job)
    name, request, _ = render_training(job)
    return TrainingPlan(
        job_name=name,
        request=request,
        drafter_uri=drafter_uri(output_path(job), name),
        num_speculative_tokens=spec.num_depths,
        cost=training_cost(job),
        warnings=tuple(warnings),
        target=asdict(job.target),
    )


def plan_document(plan: TrainingPlan) -> dict[str, Any]:
    """What `peagle plan --file TRAIN_SPEC --json` prints: the request with the cost
    estimate and what the job yields beside it."""
    cost = asdict(plan.cost)
    cost["usd"] = plan.cost.usd
    return {
        "kind": "training",
        "create_training_job": plan.request,
        "job_name": plan.job_name,
        "cost": cost,
        "drafter_uri": plan.drafter_uri,
        "num_speculative_tokens": plan.num_speculative_tokens,
        "target": plan.target,
        "warnings": list(plan.warnings),
    }
