"""The planner: spec -> Deployment -> findings -> requests (see plan.pipeline).

- `resolve(spec) -> Deployment` (plan.resolve): every default filled once, with origins;
- `check(deployment) -> Findings` (plan.check): every rule once, in one list;
- `render(deployment) -> Requests` (plan.render): the exact, content-named requests;
- `build_plan(spec) -> Plan`: the three in a row.

The three steps are imported from their modules (`peagle_deploy.plan.resolve.resolve`,
...); this package re-exports only the plan-level names.
"""

from __future__ import annotations

from peagle_deploy.naming import (
    MANAGED_TAG,
    MANAGED_TAG_COUNT,
    MODEL_TAG,
    SPEC_HASH_TAG,
    STAGE_TAG,
)
from peagle_deploy.plan.pipeline import Plan, build_plan, plan_of
from peagle_deploy.plan.resolve import DEFAULT_TIMEOUT_S, PLACEHOLDER_ROLE_ARN, with_speculative

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MANAGED_TAG",
    "MANAGED_TAG_COUNT",
    "MODEL_TAG",
    "PLACEHOLDER_ROLE_ARN",
    "SPEC_HASH_TAG",
    "STAGE_TAG",
    "Plan",
    "build_plan",
    "plan_of",
    "with_speculative",
]
