"""`peagle doctor`: read-only checks, in seconds, of what a plan would deploy.

What SageMaker reports 10-20 minutes after CreateEndpoint (an empty drafter prefix, a
drafter that is not a P-EAGLE head, a role that cannot read the weights, a quota of 0,
an image tag that does not exist) is visible from the deploying account before anything
is created. One module per concern: `artifacts`, `role`, `capacity`, `image`; `runner`
runs them concurrently (`workers`: Ctrl-C never waits for a stalled read); `gate` stops a
deployment when one fails. The role's permissions are decided as IAM decides them
(docs/doctor.md): `simulation` (the role's side, from IAM's policy simulator),
`resource_policies` (bucket, key and repository policies, read read-only),
`policy_eval` (the policy language, with unknown context), `decision` (AWS's
evaluation logic combining the two sides).
"""

from __future__ import annotations

from peagle_deploy.doctor.gate import DoctorFailedError, require_healthy
from peagle_deploy.doctor.result import CheckResult, DoctorReport, Status
from peagle_deploy.doctor.runner import run_doctor

__all__ = [
    "CheckResult",
    "DoctorFailedError",
    "DoctorReport",
    "Status",
    "require_healthy",
    "run_doctor",
]
