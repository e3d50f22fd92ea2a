"""An experiment's plan: the two variants, what the comparison reads, and the checks.

Built on the planner's pipeline (`peagle_deploy.plan`): the incumbent is the spec
without its `experiment` block, resolved, checked and rendered as any spec; the candidate
is the incumbent's Deployment with the candidate's speculative settings
(`plan.resolve.with_speculative`: the same model source, the same rules), checked like
any Deployment. The requests (the candidate's CreateModel; a shadow experiment's
CreateInferenceExperiment, or a split experiment's config and updates) come from the
planner's render step (`plan.experiment_requests`); this module holds only what is an
experiment's own: its settings, where its observations come from, and the refusals of
experiments that could not decide.

A promotion deploys `candidate_spec(spec)`, which resolves to the candidate's Deployment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from peagle_deploy.catalog.images import runs_peagle_serve
from peagle_deploy.errors import InputError
from peagle_deploy.experiment.design import check_comparable, check_decidable, set_up_costs
from peagle_deploy.findings import PlanWarning
from peagle_deploy.plan import Plan, build_plan, plan_of, with_speculative
from peagle_deploy.plan.experiment_requests import (
    CANDIDATE_VARIANT,
    PLACEHOLDER_EXPERIMENT_ROLE_ARN,
    ExperimentLayout,
    ExperimentRequests,
    render_experiment,
)
from peagle_deploy.plan.render import VARIANT_NAME
from peagle_deploy.spec.loader import spec_from_dict
from peagle_deploy.spec.models import DeploymentSpec, ExperimentSpec, SpeculativeDecodingSpec
from peagle_deploy.validation.aws_shapes import check_role

__all__ = ["CANDIDATE_VARIANT", "ExperimentPlan", "candidate_spec", "experiment_plan"]

Source = Literal["lines", "detailed"]
"""Where the per-variant observations come from: the project's container metric lines
(CloudWatch Logs), or SageMaker's detailed observability metrics (CloudWatch, PromQL)."""


def candidate_spec(spec: DeploymentSpec) -> DeploymentSpec:
    """What a promoted candidate deploys: the spec with the candidate's speculative
    settings and no experiment block."""
    experiment = spec.experiment
    if experiment is None:
        raise InputError("experiment", "the spec has no experiment block")
    data = spec.model_dump(mode="json", exclude_none=True)
    data.pop("experiment", None)
    speculative = dict(data.get("speculative") or {})
    speculative.update(experiment.candidate.model_dump(mode="json", exclude_none=True))
    data["speculative"] = speculative
    return spec_from_dict(data)


def incumbent_spec(spec: DeploymentSpec) -> DeploymentSpec:
    """The spec without its experiment block: what serves before and after."""
    return spec.model_copy(update={"experiment": None})


def observation_source(image_uri: str) -> Source:
    """The project's image writes metric lines; any other image is read through
    SageMaker's detailed observability (vLLM's own /metrics, scraped by SageMaker)."""
    return "lines" if runs_peagle_serve(image_uri) else "detailed"


@dataclass(frozen=True)
class ExperimentPlan:
    """Everything `peagle experiment start` sends, and what it was derived from."""

    incumbent: Plan
    candidate: Plan
    """The candidate's own plan, as a promotion deploys it."""
    settings: ExperimentSpec
    candidate_instances: int
    requests: ExperimentRequests
    source: Source
    warnings: list[PlanWarning] = field(default_factory=list)

    incumbent_variant: str = VARIANT_NAME
    candidate_variant: str = CANDIDATE_VARIANT
    incumbent_instances_now: int | None = None
    """What the incumbent runs now, when it was read and differs from the spec's."""

    @property
    def incumbent_instances(self) -> int:
        return self.incumbent_instances_now or self.incumbent.spec.initial_instance_count

    @property
    def candidate_model_name(self) -> str:
        return self.requests.candidate_model_name

    @property
    def create_candidate_model(self) -> dict[str, Any]:
        return self.requests.create_candidate_model

    @property
    def config_name(self) -> str | None:
        """The split experiment's config (a shadow experiment's is SageMaker's)."""
        return self.requests.config_name

    @property
    def experiment_name(self) -> str | None:
        """The shadow experiment's InferenceExperiment."""
        return self.requests.experiment_name

    def to_json(self) -> dict[str, Any]:
        from peagle_deploy.validation.secrets import redact_environment

        r = self.requests
        sent = {
            "create_candidate_model": redact_environment(r.create_candidate_model),
            "create_inference_experiment": r.create_inference_experiment,
            "create_endpoint_config": r.create_endpoint_config,
            "start_update_endpoint": r.start_update,
            "restore_update_endpoint": r.restore_update,
        }
        return {
            "mode": self.settings.mode,
            "observations": self.source,
            "variants": {
                "incumbent": {
                    "variant": self.incumbent_variant,
                    "model": self.incumbent.model_name,
                    "speculative_config": self.incumbent.speculative_config,
                    "instances": self.incumbent_instances,
                },
                "candidate": {
                    "variant": self.candidate_variant,
                    "model": r.candidate_model_name,
                    "speculative_config": self.candidate.speculative_config,
                    "instances": self.candidate_instances,
                },
            },
            **{k: v for k, v in sent.items() if v is not None},
            "set_ups": set_up_costs(self.settings, self.incumbent_instances),
            "warnings": list(self.warnings),
        }


def check_experiment(
    incumbent: Plan, candidate: Plan, source: Source, *, calibration: bool = False
) -> None:
    """Refuse an experiment that cannot decide anything, before any AWS call."""
    same = incumbent.speculative_config == candidate.speculative_config and (
        incumbent.drafter_uri == candidate.drafter_uri
    )
    if calibration and not same:
        raise InputError(
            "experiment.candidate",
            "differs from the incumbent, but a calibration (A/A) runs a copy of the incumbent",
            "empty with calibration: true",
        )
    if same and not calibration:
        raise InputError(
            "experiment.candidate",
            "gives the incumbent's own speculative settings: there is nothing to compare",
            "a K, mode or drafter that differs from `speculative`, or calibration: true "
            "for an A/A run",
        )
    if source == "detailed":
        if incumbent.spec.detailed_observability is False:
            raise InputError(
                "detailed_observability",
                f"is false, but {incumbent.image_uri} is not the project's image: the "
                "experiment reads each variant's vLLM metrics from SageMaker's detailed "
                "observability",
                "true or unset (or the project's image, whose metric lines it reads)",
            )
        return
    for who, plan in (("speculative.mode", incumbent), ("experiment.candidate.mode", candidate)):
        if plan.speculative_config is None:
            raise InputError(
                who,
                "none: with the project's image both variants must draft (its metric "
                "lines, which the comparison reads, are written while drafting)",
                ["p-eagle", "eagle3"],
            )


def _as_candidate(field_name: str, text: str) -> tuple[str, str]:
    """A finding about the candidate's speculative settings, named as the user wrote them."""
    head, _, rest = field_name.partition(".")
    if head != "speculative" or not rest:
        return field_name, text
    return f"experiment.candidate.{rest}", text.replace("speculative.", "experiment.candidate.")


def _candidate_plan(incumbent: Plan, spec: DeploymentSpec) -> Plan:
    """The candidate: the incumbent's Deployment with the candidate's speculative settings
    (`with_speculative`: same model source, same rules), checked like any; a refusal of
    one of its fields names the field of the candidate (`experiment.candidate.*`)."""
    assert spec.experiment is not None
    given = spec.experiment.candidate.model_dump(mode="json", exclude_none=True)
    try:
        speculative = SpeculativeDecodingSpec.model_validate(
            {**incumbent.spec.speculative.model_dump(mode="json", exclude_none=True), **given}
        )
        return plan_of(with_speculative(incumbent.deployment, speculative))
    except ValidationError as exc:
        raise InputError("experiment.candidate", str(exc.errors()[0]["msg"])) from None
    except InputError as exc:
        where, problem = _as_candidate(exc.field, exc.problem)
        if where != exc.field:
            raise InputError(where, problem, exc.allowed) from None
        raise


def _warnings(xp_incumbent: Plan, candidate: Plan, settings: ExperimentSpec) -> list[PlanWarning]:
    warnings = [
        PlanWarning(*_as_candidate(w.field, w.message))
        for w in candidate.warnings
        if w not in xp_incumbent.warnings
    ]
    if settings.mode == "split":
        warnings.append(
            PlanWarning(
                "experiment.mode",
                f"split: the candidate answers {settings.share:.0%} of the requests itself",
            )
        )
    return warnings


def experiment_plan(
    spec: DeploymentSpec,
    *,
    experiment_role_arn: str | None = None,
    incumbent_instances: int | None = None,
) -> ExperimentPlan:
    """Plan the incumbent, the candidate and the experiment's requests; InputError on
    refusal. `experiment_role_arn` is the role SageMaker assumes to run a shadow
    experiment (a placeholder without it, which `experiment start` refuses).
    `incumbent_instances`: what the incumbent runs now, when that is not the spec's
    initial_instance_count (an autoscaled endpoint); the candidate is sized from it."""
    settings = spec.experiment
    if settings is None:
        raise InputError("experiment", "the spec has no experiment block")
    check_role(experiment_role_arn, "experiment_role_arn")
    incumbent = build_plan(incumbent_spec(spec))
    candidate = _candidate_plan(incumbent, spec)
    source = observation_source(incumbent.image_uri)
    check_experiment(incumbent, candidate, source, calibration=settings.calibration)
    count = incumbent_instances or incumbent.spec.initial_instance_count
    check_comparable(settings, count)
    check_decidable(settings, incumbent.deployment.environment)
    instances = settings.candidate_instances(count)
    layout = ExperimentLayout(
        mode=settings.mode,
        share_percent=round(settings.share * 100),
        candidate_instances=instances,
        experiment_role_arn=experiment_role_arn or PLACEHOLDER_EXPERIMENT_ROLE_ARN,
        detailed_observability=source == "detailed",
        incumbent_instances=count,
    )
    requests = render_experiment(
        incumbent.deployment,
        candidate.deployment,
        layout,
        tags=list(incumbent.tags),
        incumbent_config_name=incumbent.endpoint_config_name,
    )
    return ExperimentPlan(
        incumbent=incumbent,
        candidate=candidate,
        settings=settings,
        candidate_instances=instances,
        requests=requests,
        source=source,
        warnings=_warnings(incumbent, candidate, settings),
        incumbent_instances_now=incumbent_instances,
    )
