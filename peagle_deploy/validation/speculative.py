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

from peagle_deploy.deployment import Deployment
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning
from peagle_deploy.validation.aws_shapes import check_channel

VLLM_MAX_DRAFT_TOKENS = 128
"""The most draft tokens vLLM verifies per request and step: `MAX_SPEC_LEN = 128` in
vllm/v1/sample/rejection_sampler.py, asserted on every speculative step (the same in
vLLM 0.18.0, 0.27.1 and 0.30.0). A larger K starts, then fails its first step."""

TOKENS_BESIDE_DRAFTS = 3
"""What a decoding step needs in max_model_len besides K drafts: one prompt token, the
token the drafts extend, and the sampled (bonus) token. vLLM 0.30.0's scheduler
(v1/core/sched/scheduler.py) trims a step to `max_model_len - num_computed_tokens - 1`
tokens, so with `K > max_model_len - 3` no step can ever verify K drafts."""


def max_draft_tokens(max_model_len: int | None) -> int:
    """The largest K vLLM can use: its per-step cap, or less when max_model_len is short."""
    if max_model_len is None:
        return VLLM_MAX_DRAFT_TOKENS
    return max(1, min(VLLM_MAX_DRAFT_TOKENS, max_model_len - TOKENS_BESIDE_DRAFTS))


def check_k_bound(k: int, max_model_len: int | None, drafter_parallel_tokens: int | None) -> None:
    """K within what vLLM can verify (VLLM_MAX_DRAFT_TOKENS, max_model_len); the error
    names the bound and, when known, what the drafter was trained for."""
    bound = max_draft_tokens(max_model_len)
    if k <= bound:
        return
    reasons = []
    if k > VLLM_MAX_DRAFT_TOKENS:
        reasons.append(f"vLLM verifies at most {VLLM_MAX_DRAFT_TOKENS} draft tokens per step")
    if max_model_len is not None and k > max_model_len - TOKENS_BESIDE_DRAFTS:
        reasons.append(
            f"max_model_len {max_model_len} leaves room for at most "
            f"{max(max_model_len - TOKENS_BESIDE_DRAFTS, 0)} (K + {TOKENS_BESIDE_DRAFTS} "
            "tokens must fit in a step)"
        )
    why = "; ".join(reasons)
    allowed = f"1-{bound}"
    if drafter_parallel_tokens is not None:
        allowed += (
            f"; the drafter was trained for {drafter_parallel_tokens} parallel tokens, "
            "above that acceptance drops"
        )
    raise InputError("speculative.num_speculative_tokens", f"{k} is too many: {why}", allowed)


def check_speculative(dep: Deployment) -> list[PlanWarning]:
    """K against the drafter and vLLM's limits; parallel drafting only with a P-EAGLE
    (EAGLE-3) drafter."""
    s, spec = dep.speculative, dep.spec
    drafter = s.drafter
    if drafter is None:  # mode none
        given = spec.speculative
        if given.num_speculative_tokens is not None or given.num_speculative_tokens_per_batch_size:
            return [
                PlanWarning(
                    "speculative.num_speculative_tokens",
                    "speculative.mode is none: num_speculative_tokens is ignored",
                )
            ]
        return []
    k, trained, kind = s.num_speculative_tokens, drafter.trained_tokens, drafter.kind
    check_k_bound(k, dep.max_model_len, trained)
    check_channel(s.drafter_channel)
    warnings = _check_drafter_kind(s.mode, kind, drafter.kind_field)
    if s.mode == "p-eagle" and not v2_runner_off(spec.env.get(V2_RUNNER_ENV)):
        raise InputError(
            f"env.{V2_RUNNER_ENV}",
            f"is {spec.env[V2_RUNNER_ENV]!r}, but vLLM's V2 model runner does not do parallel "
            "drafting (it fell back to sequential drafting, newer vLLM refuses)",
            "0 or unset with mode p-eagle",
        )
    if s.mode == "p-eagle" and trained is not None and k > trained:
        warnings.append(
            PlanWarning(
                "speculative.num_speculative_tokens",
                f"speculative.num_speculative_tokens={k} is above the {trained} "
                "parallel tokens the drafter was trained for; acceptance will drop",
            )
        )
    if s.k_schedule is not None:
        check_k_schedule([list(e) for e in s.k_schedule], k)
    return warnings


def _check_drafter_kind(mode: str, kind: str | None, kind_field: str) -> list[PlanWarning]:
    """Parallel drafting needs a P-EAGLE head; eagle3 mode an EAGLE-3 (or P-EAGLE) head."""
    if mode == "p-eagle" and kind != "p-eagle":
        raise InputError(
            kind_field,
            f"parallel drafting (mode p-eagle) needs a P-EAGLE drafter, got {kind!r}",
            ["p-eagle (an EAGLE-3 head trained for parallel drafting)"],
        )
    if mode == "eagle3" and kind not in ("eagle3", "p-eagle"):
        raise InputError(
            kind_field,
            f"mode eagle3 needs an EAGLE-3 drafter, got {kind!r}",
            ["eagle3", "p-eagle"],
        )
    if mode == "eagle3" and kind == "p-eagle":
        return [
            PlanWarning(
                "speculative.mode",
                "mode eagle3 with a P-EAGLE head drafts sequentially; "
                "use mode p-eagle or point speculative.drafter_uri at an EAGLE-3 head",
            )
        ]
    return []


def check_k_schedule(schedule: list[list[int]], k: int) -> None:
    """The shared schedule rule (peagle_serve.contract.k_schedule_problem), as an InputError."""
    found = k_schedule_problem(schedule, k)
    if found is None:
        return
    field = f"speculative.{K_SCHEDULE_FIELD}"
    if found.index is not None:
        field += f"[{found.index}]"
    raise InputError(field, found.problem, k_schedule_allowed(k))
