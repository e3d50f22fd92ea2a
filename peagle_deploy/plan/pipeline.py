"""spec -> Plan: resolve, check, render. No AWS call, no credentials needed.

    deployment = resolve(spec)      # every default filled once (plan.resolve)
    findings = check(deployment)    # every rule once; InputError refuses (plan.check)
    requests = render(deployment)   # the exact, content-named requests (plan.render)

The same spec always gives the same names (see plan.render), so re-deploying an
unchanged spec is a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from peagle_deploy.deployment import Deployment
from peagle_deploy.findings import CdkIncompatibility, PlanWarning
from peagle_deploy.plan.check import check
from peagle_deploy.plan.render import Requests, render
from peagle_deploy.plan.resolve import resolve
from peagle_deploy.spec.models import DeploymentSpec, RolloutSpec
from peagle_deploy.validation import secrets


@dataclass(frozen=True)
class Plan(Requests):
    """A checked Deployment, its findings, and everything deploy (SDK or CDK) sends
    (the rendered `Requests`)."""

    deployment: Deployment
    warnings: list[PlanWarning]
    cdk_incompatibilities: list[CdkIncompatibility] = field(default_factory=list)

    # Views of the deployment, for readers of a plan (doctor, the CLI, the CDK stack).
    @property
    def spec(self) -> DeploymentSpec:
        return self.deployment.spec

    @property
    def region(self) -> str:
        return self.deployment.region

    @property
    def endpoint_name(self) -> str:
        return self.deployment.endpoint_name

    @property
    def image_uri(self) -> str:
        return self.deployment.image_uri

    @property
    def vllm_version(self) -> str | None:
        """The vLLM the image carries, when the plan knows it (tag, own image, or spec)."""
        return self.deployment.engine.vllm

    @property
    def engine_known_by(self) -> str:
        """How the plan knows the image's vLLM (`unknown` when it does not)."""
        return self.deployment.engine.known_by

    @property
    def model_data_uri(self) -> str:
        return str(self.deployment.model_data.uri)

    @property
    def drafter_uri(self) -> str | None:
        drafter = self.deployment.speculative.drafter
        return drafter.data.uri if drafter is not None else None

    @property
    def instance_type(self) -> str:
        return self.deployment.instance_type

    @property
    def tensor_parallel_size(self) -> int:
        return self.deployment.tensor_parallel_size

    @property
    def max_model_len(self) -> int | None:
        return self.deployment.max_model_len

    @property
    def num_speculative_tokens(self) -> int | None:
        """K, or None without speculative decoding."""
        s = self.deployment.speculative
        return s.num_speculative_tokens if s.enabled else None

    @property
    def speculative_config(self) -> dict[str, Any] | None:
        config = self.deployment.speculative.config
        return dict(config) if config is not None else None

    @property
    def execution_role_arn(self) -> str:
        return self.deployment.execution_role_arn

    @property
    def has_placeholder_role(self) -> bool:
        return self.deployment.origin("execution_role_arn") != "spec"

    @property
    def model_source(self) -> str:
        return self.deployment.source.kind

    @property
    def model_data_download_timeout_s(self) -> int:
        return self.deployment.model_data_download_timeout_s

    @property
    def container_startup_health_check_timeout_s(self) -> int:
        return self.deployment.container_startup_health_check_timeout_s

    @property
    def inference_ami_version(self) -> str | None:
        return self.deployment.inference_ami_version

    @property
    def rollout(self) -> RolloutSpec:
        """The spec's rollout with its default strategy resolved for the instance count."""
        return self.deployment.rollout

    @property
    def secret_env_keys(self) -> list[str]:
        """Environment keys whose values look like credentials (shown redacted by `to_json`)."""
        return secrets.secret_env_keys(self.spec.env)

    @property
    def names(self) -> dict[str, str]:
        """The three resource names."""
        return {
            "model": self.model_name,
            "endpoint_config": self.endpoint_config_name,
            "endpoint": self.endpoint_name,
        }

    def to_json(self, *, redact_secrets: bool = True) -> dict[str, Any]:
        """The machine-readable plan (`peagle plan --json` prints exactly this).

        Environment values that look like credentials are replaced by `<redacted>` unless
        `redact_secrets=False`: a plan is for showing and logging; the SDK sends
        `create_model` itself, which is never redacted.
        """
        create_model = (
            secrets.redact_environment(self.create_model) if redact_secrets else self.create_model
        )
        return {
            "create_model": create_model,
            "create_endpoint_config": self.create_endpoint_config,
            "create_endpoint": self.create_endpoint,
            "update_endpoint": self.update_endpoint,
            "autoscaling": self.autoscaling,
            "secrets": dict(self.secret_refs),
            "warnings": list(self.warnings),
            "engine": {
                "image": self.image_uri,
                "vllm": self.vllm_version,
                "known_by": self.engine_known_by,
            },
            "names": self.names,
            "content_hash": self.content_hash,
        }


def build_plan(spec: DeploymentSpec) -> Plan:
    """Resolve, check and render `spec`; InputError on refusal."""
    deployment = resolve(spec)
    return plan_of(deployment)


def plan_of(deployment: Deployment) -> Plan:
    """Check and render a resolved deployment (e.g. a candidate from `with_speculative`)."""
    findings = check(deployment)
    requests = render(deployment)
    return Plan(
        deployment=deployment,
        warnings=findings.warnings,
        cdk_incompatibilities=findings.cdk_incompatibilities,
        **vars(requests),
    )
