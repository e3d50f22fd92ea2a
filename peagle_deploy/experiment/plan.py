"""The requests of an experiment: the candidate's model and a config that carries both variants.

Built on the planner's pipeline (`peagle_deploy.plan`): the incumbent is the spec
without its `experiment` block, resolved, checked and rendered as any spec; the candidate
is the incumbent's Deployment with the candidate's speculative settings
(`plan.resolve.with_speculative`: the same model source, the same rules), checked like any
Deployment. From the two:
- the candidate's CreateModel (`plan.render.create_model`) with the variant's name in the
  environment (`PEAGLE_VARIANT_NAME`), so its container's metric lines say which variant
  they come from, and a content-derived name of its own; a promotion deploys
  `candidate_spec(spec)`, which resolves to the same Deployment;
- one CreateEndpointConfig (`plan.render.production_variant` for each variant): the
  incumbent's production variant unchanged (`AllTraffic`:
  same model, so its container keeps running as it does), plus the candidate as a shadow
  variant (`ShadowProductionVariants`, weight = sampling share against the production
  variant's 1.0) or as a second production variant (weights = shares of the requests);
- UpdateEndpoint requests to start (onto that config) and to restore (back onto the
  incumbent's config). Neither carries a blue/green DeploymentConfig: SageMaker's
  deployment guardrails need the new config to have the old one's variant names
  (docs/platform-facts.md), which adding or removing the candidate changes; a plain
  UpdateEndpoint deploys the config to a new fleet and shifts traffic with no
  availability loss (botocore's UpdateEndpoint documentation).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from peagle_serve.contract import VARIANT_NAME_ENV
from pydantic import ValidationError

from peagle_deploy.catalog.images import runs_peagle_serve
from peagle_deploy.deployment import Deployment
from peagle_deploy.errors import InputError
from peagle_deploy.experiment.design import check_comparable, check_decidable
from peagle_deploy.findings import PlanWarning
from peagle_deploy.naming import DIGEST_LEN, derived_name
from peagle_deploy.plan import Plan, build_plan, plan_of, render, with_speculative
from peagle_deploy.plan.render import VARIANT_NAME
from peagle_deploy.spec.loader import spec_from_dict
from peagle_deploy.spec.models import DeploymentSpec, ExperimentSpec, SpeculativeDecodingSpec

CANDIDATE_VARIANT = "Candidate"
"""The candidate's variant name (the incumbent keeps `AllTraffic`)."""


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


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LEN]


@dataclass(frozen=True)
class ExperimentPlan:
    """Everything `peagle experiment start` sends, and what it was derived from."""

    incumbent: Plan
    candidate: Plan
    """The candidate's own plan, as a promotion deploys it."""
    settings: ExperimentSpec
    candidate_instances: int
    candidate_model_name: str
    config_name: str
    create_candidate_model: dict[str, Any]
    create_experiment_config: dict[str, Any]
    start_update: dict[str, Any]
    restore_update: dict[str, Any]
    warnings: list[PlanWarning] = field(default_factory=list)

    incumbent_variant: str = VARIANT_NAME
    candidate_variant: str = CANDIDATE_VARIANT

    def to_json(self) -> dict[str, Any]:
        from peagle_deploy.validation.secrets import redact_environment

        return {
            "mode": self.settings.mode,
            "variants": {
                "incumbent": {
                    "variant": self.incumbent_variant,
                    "model": self.incumbent.model_name,
                    "speculative_config": self.incumbent.speculative_config,
                    "instances": self.incumbent.spec.initial_instance_count,
                },
                "candidate": {
                    "variant": self.candidate_variant,
                    "model": self.candidate_model_name,
                    "speculative_config": self.candidate.speculative_config,
                    "instances": self.candidate_instances,
                },
            },
            "create_candidate_model": redact_environment(self.create_candidate_model),
            "create_endpoint_config": self.create_experiment_config,
            "start_update_endpoint": self.start_update,
            "restore_update_endpoint": self.restore_update,
            "warnings": list(self.warnings),
        }


def _candidate_model(
    incumbent: Plan, candidate: Deployment
) -> tuple[str, dict[str, Any], Deployment]:
    """The candidate's CreateModel: its Deployment with the variant named in the container
    environment, rendered by the planner's own `create_model`, named by its content."""
    named = replace(
        candidate, environment={**candidate.environment, VARIANT_NAME_ENV: CANDIDATE_VARIANT}
    )
    body = {
        k: v
        for k, v in render.create_model(named, "", []).items()
        if k not in ("ModelName", "Tags")
    }
    # as the planner names a model: a changed secret reference is a new model
    refs = dict(incumbent.secret_refs)
    name = derived_name(
        incumbent.endpoint_name,
        "m",
        _digest([incumbent.endpoint_name, body, *([refs] if refs else [])]),
    )
    return name, render.create_model(named, name, list(incumbent.tags)), named


def _experiment_config(
    incumbent: Plan,
    candidate: Deployment,
    settings: ExperimentSpec,
    model: str,
    instances: int,
) -> tuple[str, dict[str, Any]]:
    """Both variants in one config, from the planner's `production_variant`."""
    dep = incumbent.deployment
    variant = render.production_variant(
        candidate, model, name=CANDIDATE_VARIANT, weight=settings.share
    )
    variant["InitialInstanceCount"] = instances
    request: dict[str, Any] = {"EndpointConfigName": ""}
    if settings.mode == "shadow":
        request["ProductionVariants"] = [render.production_variant(dep, incumbent.model_name)]
        request["ShadowProductionVariants"] = [variant]
    else:
        request["ProductionVariants"] = [
            render.production_variant(
                dep, incumbent.model_name, weight=round(1 - settings.share, 6)
            ),
            variant,
        ]
    if dep.spec.kms_key_id is not None:
        request["KmsKeyId"] = dep.spec.kms_key_id
    body = {k: v for k, v in request.items() if k != "EndpointConfigName"}
    name = derived_name(incumbent.endpoint_name, "c", _digest([incumbent.endpoint_name, body]))
    request["EndpointConfigName"] = name
    request["Tags"] = list(incumbent.tags)
    return name, request


def check_experiment(incumbent: Plan, candidate: Plan, *, calibration: bool = False) -> None:
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
    for who, plan in (("speculative.mode", incumbent), ("experiment.candidate.mode", candidate)):
        if plan.speculative_config is None:
            raise InputError(
                who,
                "none: both variants must draft (the container's metric lines, which the "
                "comparison reads, come from drafting)",
                ["p-eagle", "eagle3"],
            )
    if not runs_peagle_serve(incumbent.image_uri):
        raise InputError(
            "image_uri",
            f"{incumbent.image_uri} does not run peagle-serve, whose metric lines give each "
            "variant's decode speed, latency and acceptance: an experiment could not decide",
            "the project's image (repository peagle-vllm; docs/container.md)",
        )


def _candidate_plan(incumbent: Plan, spec: DeploymentSpec) -> Plan:
    """The candidate: the incumbent's Deployment with the candidate's speculative settings
    (`with_speculative`: same model source, same rules), checked like any; a refusal of
    one of its fields names the field the user wrote (`experiment.candidate.*`)."""
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
        head, _, rest = exc.field.partition(".")
        if head == "speculative" and rest.split(".")[0] in given:
            raise InputError(f"experiment.candidate.{rest}", exc.problem, exc.allowed) from None
        raise


def experiment_plan(spec: DeploymentSpec) -> ExperimentPlan:
    """Plan the incumbent, the candidate and the experiment's requests; InputError on refusal."""
    settings = spec.experiment
    if settings is None:
        raise InputError("experiment", "the spec has no experiment block")
    incumbent = build_plan(incumbent_spec(spec))
    candidate = _candidate_plan(incumbent, spec)
    check_experiment(incumbent, candidate, calibration=settings.calibration)
    count = incumbent.spec.initial_instance_count
    check_comparable(settings, count)
    check_decidable(settings, incumbent.deployment.environment)
    instances = settings.candidate_instances(count)
    model_name, create_model, _ = _candidate_model(incumbent, candidate.deployment)
    config_name, create_config = _experiment_config(
        incumbent, candidate.deployment, settings, model_name, instances
    )
    warnings = [w for w in candidate.warnings if w not in incumbent.warnings]
    if settings.mode == "split":
        warnings.append(
            PlanWarning(
                "experiment.mode",
                f"split: the candidate answers {settings.share:.0%} of the requests itself",
            )
        )
    return ExperimentPlan(
        incumbent=incumbent,
        candidate=candidate,
        settings=settings,
        candidate_instances=instances,
        candidate_model_name=model_name,
        config_name=config_name,
        create_candidate_model=create_model,
        create_experiment_config=create_config,
        start_update={"EndpointName": incumbent.endpoint_name, "EndpointConfigName": config_name},
        restore_update={
            "EndpointName": incumbent.endpoint_name,
            "EndpointConfigName": incumbent.endpoint_config_name,
        },
        warnings=warnings,
    )
