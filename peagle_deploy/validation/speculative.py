"""The speculative-decoding setup against the drafter (engine-independent rules).

What a particular vLLM accepts is checked in validation.engine; the rules shared with the
serving container (V2 model runner, K-schedule shape) live in peagle_serve.contract.
"""

from __future__ import annotations

from peagle_serve.contract import (
    K_SCHEDULE_FIELD,
    V2_RUNNER_ENV,
    k_schedule_allowed,
    k_schedule_problem,
    v2_runner_off,
)

from peagle_deploy.errors import SpecError
from peagle_deploy.findings import PlanWarning
from peagle_deploy.spec.models import DeploymentSpec
from peagle_deploy.validation.aws_shapes import check_channel


def check_speculative(
    spec: DeploymentSpec,
    *,
    k: int,
    drafter_kind: str | None,
    drafter_parallel_tokens: int | None,
    drafter_field: str,
) -> list[PlanWarning]:
    """K against the drafter; parallel drafting only with a P-EAGLE (EAGLE-3) drafter."""
    s = spec.speculative
    warnings: list[PlanWarning] = []
    if s.mode == "none":
        if s.num_speculative_tokens is not None or s.num_speculative_tokens_per_batch_size:
            warnings.append(
                PlanWarning(
                    "speculative.num_speculative_tokens",
                    "speculative.mode is none: num_speculative_tokens is ignored",
                )
            )
        return warnings
    check_channel(s.drafter_channel)
    kind_field = "speculative.drafter_kind" if s.drafter_kind else drafter_field
    if s.mode == "p-eagle" and drafter_kind != "p-eagle":
        raise SpecError(
            kind_field,
            f"parallel drafting (mode p-eagle) needs a P-EAGLE drafter, got {drafter_kind!r}",
            ["p-eagle (an EAGLE-3 head trained for parallel drafting)"],
        )
    if s.mode == "eagle3" and drafter_kind not in ("eagle3", "p-eagle"):
        raise SpecError(
            kind_field,
            f"mode eagle3 needs an EAGLE-3 drafter, got {drafter_kind!r}",
            ["eagle3", "p-eagle"],
        )
    if s.mode == "eagle3" and drafter_kind == "p-eagle":
        warnings.append(
            PlanWarning(
                "speculative.mode",
                "mode eagle3 with a P-EAGLE head drafts sequentially; "
                "use mode p-eagle or point speculative.drafter_uri at an EAGLE-3 head",
            )
        )
    if s.mode == "p-eagle" and not v2_runner_off(spec.env.get(V2_RUNNER_ENV)):
        raise SpecError(
            f"env.{V2_RUNNER_ENV}",
            f"is {spec.env[V2_RUNNER_ENV]!r}, but vLLM's V2 model runner does not do parallel "
            "drafting (it fell back to sequential drafting, newer vLLM refuses)",
            "0 or unset with mode p-eagle",
        )
    if s.mode == "p-eagle" and drafter_parallel_tokens is not None and k > drafter_parallel_tokens:
        warnings.append(
            PlanWarning(
                "speculative.num_speculative_tokens",
                f"speculative.num_speculative_tokens={k} is above the {drafter_parallel_tokens} "
                "parallel tokens the drafter was trained for; acceptance will drop",
            )
        )
    if s.num_speculative_tokens_per_batch_size is not None:
        check_k_schedule([list(e) for e in s.num_speculative_tokens_per_batch_size], k)
    return warnings


def check_k_schedule(schedule: list[list[int]], k: int) -> None:
    """The shared schedule rule (peagle_serve.contract.k_schedule_problem), as a SpecError."""
    found = k_schedule_problem(schedule, k)
    if found is None:
        return
    field = f"speculative.{K_SCHEDULE_FIELD}"
    if found.index is not None:
        field += f"[{found.index}]"
    raise SpecError(field, found.problem, k_schedule_allowed(k))
