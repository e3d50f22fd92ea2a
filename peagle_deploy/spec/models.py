"""The deployment spec: what a user wants deployed, before any default is filled in.

Fields left as None are filled from the catalog (or JumpStart) when the plan is built,
so a spec stays short and every default remains overridable. Field docstrings become
the JSON-schema descriptions and the help of the CLI flags, read from `field_docs.json`
(peagle_deploy.spec.field_docs), which `python -m peagle_deploy.spec.flags` writes from
this file.

A field annotated with `Flag(...)` is a knob of `peagle plan` / `peagle deploy` and a
keyword of `deploy_peagle()`: the flag table (`peagle_deploy.spec.flags`) is derived
from these annotations, so a knob is declared here and nowhere else. A flag without a
panel is shown in the first (`PANEL_MODEL`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from peagle_deploy.spec.empty import EMPTY_ALLOWED, EMPTY_PROBLEM, is_empty
from peagle_deploy.spec.field_docs import describe
from peagle_deploy.spec.flag_table import Flag
from peagle_deploy.spec.stage import StageName

SpeculativeMode = Literal["p-eagle", "eagle3", "none"]
DrafterKind = Literal["p-eagle", "eagle3", "other"]
RoutingStrategy = Literal["LEAST_OUTSTANDING_REQUESTS", "RANDOM", "PREFIX_AWARE", "KV_AWARE"]
RolloutStrategy = Literal["canary", "linear", "all-at-once"]

CFN_ROUTING_STRATEGIES: tuple[RoutingStrategy, ...] = (
    "LEAST_OUTSTANDING_REQUESTS",
    "PREFIX_AWARE",
    "RANDOM",
)
"""RoutingStrategy values CloudFormation's AWS::SageMaker::EndpointConfig accepts
(`RoutingConfig.RoutingStrategy` enum of cfn-lint 1.58's resource schema): no KV_AWARE."""

PANEL_MODEL = "Model and speculative decoding"
PANEL_CAPACITY = "Capacity and rollout"
PANEL_IDENTITY = "Names, region and tags"
PANEL_SECURITY = "Network and security"


AWS_INT_MAX = 2**31 - 1
"""Largest value of an AWS API `integer` (32-bit signed in the Smithy models that botocore's
service models come from). The counts sent to AWS have a minimum and no maximum there
(`InitialTaskCount` of SageMaker's ProductionVariant, `ResourceCapacity` of Application
Auto Scaling's RegisterScalableTarget), so this is their upper bound."""

_CONFIG = ConfigDict(
    extra="forbid",
    frozen=True,
    defer_build=True,  # also lets `describe` add the descriptions before the build
    allow_inf_nan=False,  # `weights_gb=float("nan")` from the SDK is a mistake, not a size
)


def refuse_empty(value: object, info: ValidationInfo) -> object:
    """The empty-value rule (`spec.empty`) for spec files and keywords: `region: ""` is
    an error, never us-east-1 in disguise."""
    if is_empty(value):
        raise PydanticCustomError("empty_string", EMPTY_PROBLEM, {"allowed": EMPTY_ALLOWED})
    return value


class _Strict(BaseModel):
    model_config = _CONFIG

    _no_empty_strings = field_validator("*", mode="before")(refuse_empty)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        describe(cls)


class CustomModel(_Strict):
    """Where the weights live when the model is not (only) a catalog key.

    With `model: custom` the image and the model data are required. With a catalog key
    every field here overrides the catalog's value (e.g. your own copy of the weights).
    """

    image_uri: str | None = None
    """Serving container image (an AWS vLLM SageMaker image or the project's own)."""
    model_data_uri: str | None = None
    """Target weights: an S3 prefix ending in `/` (uncompressed) or an `.tar.gz` object."""
    drafter_uri: str | None = None
    """Drafter (speculator) weights: an S3 prefix ending in `/`."""
    drafter_kind: DrafterKind | None = None
    """`p-eagle`: EAGLE-3 head trained for parallel drafting; `eagle3`: plain EAGLE-3 head."""
    drafter_parallel_tokens: int | None = Field(default=None, ge=1, le=AWS_INT_MAX)
    """How many parallel tokens the P-EAGLE drafter was trained for (warn when K exceeds it)."""
    weights_gb: float | None = Field(default=None, gt=0)
    """Size of the target weights in GB, for the fit check (skipped when unknown)."""
    kv_cache_gb_per_1k_tokens: float | None = Field(default=None, gt=0)
    """KV-cache GB per 1000 tokens of one sequence, for the fit check's KV floor."""
    name: str | None = None
    """Short name used in resource names (default `custom`)."""


class SpeculativeDecodingSpec(_Strict):
    """The speculative-decoding setup vLLM runs with."""

    mode: Annotated[SpeculativeMode, Flag()] = "p-eagle"
    """`p-eagle` (parallel drafting), `eagle3` (sequential drafting) or `none`."""
    num_speculative_tokens: Annotated[int | None, Flag(short="-k")] = Field(default=None, ge=1)
    """K, the number of draft tokens per step (default: the model's catalog default)."""
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = None
    """Optional K schedule: `[[start, end, K], ...]` choosing K by batch size."""
    drafter_channel: str = "eagle"
    """Additional model data channel the drafter is mounted on (JumpStart uses `eagle`)."""
    drafter_uri: str | None = None
    """Override the drafter location (e.g. a plain EAGLE-3 head to compare against)."""
    drafter_kind: DrafterKind | None = None
    """Kind of the overriding drafter; parallel drafting needs `p-eagle`."""


class VpcSpec(_Strict):
    """VPC attachment of the model containers."""

    subnet_ids: Annotated[list[str], Flag("--subnet", panel=PANEL_SECURITY)] = Field(
        default_factory=list
    )
    """Subnet ids (1-16)."""
    security_group_ids: Annotated[list[str], Flag("--security-group", panel=PANEL_SECURITY)] = (
        Field(default_factory=list)
    )
    """Security group ids (1-5)."""


class RolloutSpec(_Strict):
    """How UpdateEndpoint shifts traffic to a new config (blue/green)."""

    strategy: Annotated[
        RolloutStrategy | None,
        Flag("--rollout", keyword="rollout_strategy", panel=PANEL_CAPACITY),
    ] = None
    """`canary`, `linear` or `all-at-once`. Default: canary with 2+ instances, all-at-once
    with one (SageMaker caps a canary at 50% and a linear step at 10-50% of the instances)."""
    canary_percent: int = Field(default=10, ge=1, le=50)
    """Share of capacity that gets the new config first (canary)."""
    linear_step_percent: int = Field(default=25, ge=10, le=50)
    """Share of capacity moved per step (linear)."""
    wait_interval_s: int = Field(default=300, ge=0, le=3600)
    """Seconds between traffic shifts, watched by the alarms."""
    termination_wait_s: int = Field(default=120, ge=0, le=3600)
    """Seconds the old fleet stays up after the shift, for a fast rollback."""
    max_execution_timeout_s: int = Field(default=3600, ge=600, le=28800)
    """Upper bound for the whole rollout."""
    alarms: Annotated[list[str], Flag("--alarm", panel=PANEL_CAPACITY)] = Field(
        default_factory=list
    )
    """CloudWatch alarm names that roll the update back (0-10)."""

    def resolved(self, instance_count: int) -> RolloutSpec:
        """This rollout with the default strategy filled in for `instance_count` instances."""
        if self.strategy is not None:
            return self
        strategy: RolloutStrategy = "canary" if instance_count >= 2 else "all-at-once"
        return self.model_copy(update={"strategy": strategy})


class ScalingSpec(_Strict):
    """Target-tracking autoscaling of the endpoint variant (applied by the SDK/CDK)."""

    min_instances: int = Field(default=1, ge=1, le=AWS_INT_MAX)
    """Lower bound of the instance count."""
    max_instances: int = Field(default=1, ge=1, le=AWS_INT_MAX)
    """Upper bound of the instance count."""
    target_invocations_per_instance: int = Field(default=20, ge=1, le=AWS_INT_MAX)
    """Target of SageMakerVariantInvocationsPerInstance per minute."""


def _scalar_to_str(value: object) -> object:
    """YAML writes `0.92` and `true` unquoted; env and tag values are strings on AWS."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


class DeploymentSpec(_Strict):
    """Everything peagle-deploy needs to render the SageMaker requests of one endpoint."""

    model: str
    """A catalog key (`peagle models`), a JumpStart model id, or `custom`."""
    custom: CustomModel | None = None
    """Image and S3 sources; required for `custom`, overrides for catalog keys."""
    image_uri: Annotated[str | None, Flag()] = None
    """Override the serving image (default: an AWS vLLM SageMaker image of the region whose
    vLLM can serve the model and the speculative setup)."""
    vllm_version: str | None = Field(default=None, pattern=r"^\d+\.\d+\.\d+[0-9A-Za-z.+]*$")
    """The vLLM version the serving image carries, for images peagle-deploy cannot identify
    by their tag (your own builds); validation then checks the spec against that engine."""
    accept_eula: Annotated[bool, Flag()] = False
    """Accept the model's end-user license; gated models are refused without it."""
    speculative: SpeculativeDecodingSpec = Field(default_factory=SpeculativeDecodingSpec)
    """Speculative decoding: mode, K, K schedule, drafter channel."""
    instance_type: Annotated[str | None, Flag(short="-i", panel=PANEL_CAPACITY)] = None
    """SageMaker instance type (default: the model's catalog default, an ml.g7e type)."""
    initial_instance_count: Annotated[int, Flag("--instance-count", panel=PANEL_CAPACITY)] = Field(
        default=1, ge=1, le=AWS_INT_MAX
    )
    """Instances behind the endpoint at creation."""
    tensor_parallel_size: Annotated[int | None, Flag("--tp")] = Field(
        default=None, ge=1, le=AWS_INT_MAX
    )
    """GPUs one model replica spans (default: the catalog's; must divide the GPU count)."""
    max_model_len: Annotated[int | None, Flag()] = Field(default=None, ge=256, le=AWS_INT_MAX)
    """Maximum sequence length vLLM serves (default: the catalog's)."""
    env: Annotated[dict[str, str], Flag(short="-e")] = Field(default_factory=dict)
    """Extra container environment (`SM_VLLM_*` become vLLM flags)."""
    secrets: Annotated[dict[str, str], Flag("--secret", panel=PANEL_SECURITY)] = Field(
        default_factory=dict
    )
    """Container environment given by reference: NAME -> the full ARN of a Secrets Manager
    secret, optionally `<ARN>:<json-key>`. No value is written anywhere; it is read just
    before CreateModel and then sits in the model's environment (DescribeModel shows it).
    Not `PEAGLE_*` nor `SM_VLLM_*` (a vLLM argument is logged in clear: use VLLM_API_KEY,
    HF_TOKEN); the stage's own (a promotion never carries them)."""
    model_data_download_timeout_s: int | None = Field(default=None, ge=60, le=3600)
    """ModelDataDownloadTimeoutInSeconds (60-3600; default: the model source's, else 1800)."""
    container_startup_health_check_timeout_s: int | None = Field(default=None, ge=60, le=3600)
    """ContainerStartupHealthCheckTimeoutInSeconds (60-3600; default: the model source's,
    else 1800)."""
    volume_size_gb: int | None = Field(default=None, ge=1, le=512)
    """VolumeSizeInGB (1-512); only for instance families that attach EBS volumes."""
    network_isolation: Annotated[bool, Flag("--no-network-isolation", panel=PANEL_SECURITY)] = True
    """EnableNetworkIsolation: the container gets no outbound network (JumpStart default)."""
    vpc: VpcSpec | None = None
    """Run the containers in these subnets and security groups."""
    kms_key_id: Annotated[str | None, Flag(panel=PANEL_SECURITY)] = None
    """KMS key for the ML storage volume (endpoint config KmsKeyId)."""
    detailed_observability: bool | None = None
    """MetricsConfig.EnableDetailedObservability of the endpoint config: SageMaker scrapes
    the container's Prometheus /metrics and publishes vLLM's metrics per variant (queried
    with PromQL in CloudWatch). Unset leaves SageMaker's default, on for configs created
    after 2026-06-17; experiments with an image other than the project's need it on."""
    expected_bucket_owner: Annotated[str | None, Flag(panel=PANEL_SECURITY)] = Field(
        default=None, pattern=r"^\d{12}$"
    )
    """The account that must own the buckets of the model data and drafter (default: the
    deploying account; JumpStart's own buckets excepted): `s3:ResourceAccount` in the
    execution role's grants, `ExpectedBucketOwner` on every read peagle-deploy makes."""
    model_data_kms_key_arns: list[str] = Field(default_factory=list)
    """KMS key ARNs the model and drafter S3 objects are encrypted with (SSE-KMS, 0-5).
    Not part of any SageMaker request: the CDK stack grants its execution role
    `kms:Decrypt` on exactly these keys (through S3 only); with the SDK, your
    execution_role_arn needs that grant."""
    routing_strategy: Annotated[RoutingStrategy | None, Flag(panel=PANEL_CAPACITY)] = None
    """Request routing across instances; KV_AWARE cannot be expressed by CloudFormation."""
    inference_ami_version: str | None = None
    """InferenceAmiVersion (default: `al2023-ami-sagemaker-inference-gpu-4-1`, driver 580,
    when the image is known to be CUDA 13; else SageMaker's default)."""
    tags: Annotated[dict[str, str], Flag("--tag", panel=PANEL_IDENTITY)] = Field(
        default_factory=dict
    )
    """Extra tags on every resource (peagle:* tags are added and reserved)."""
    execution_role_arn: Annotated[
        str | None, Flag("--role-arn", keyword="role_arn", panel=PANEL_SECURITY)
    ] = None
    """IAM role SageMaker assumes; `plan` shows a placeholder when absent, deploy refuses it."""
    region: Annotated[str | None, Flag(panel=PANEL_IDENTITY)] = None
    """AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, else us-east-1)."""
    stage: Annotated[StageName, Flag(panel=PANEL_IDENTITY)] = "dev"
    """Deployment stage (dev, staging, prod, ...); part of names and tags."""
    endpoint_name: Annotated[str | None, Flag(panel=PANEL_IDENTITY)] = None
    """Endpoint name (default `peagle-<model>-<stage>`)."""

    @field_validator("env", "tags", "secrets", mode="before")
    @classmethod
    def _stringify_values(cls, value: object) -> object:
        """Accept unquoted YAML numbers/booleans as env and tag values (`true`, not `True`)."""
        if isinstance(value, dict):
            return {k: _scalar_to_str(v) for k, v in value.items()}
        return value

    rollout: RolloutSpec = Field(default_factory=RolloutSpec)
    """Blue/green rollout of updates, with alarm-based rollback."""
    scaling: ScalingSpec | None = None
    """Autoscaling bounds and target; none means a fixed instance count."""
    experiment: ExperimentSpec | None = None
    """A live experiment: a candidate's speculative settings against this spec's, on the
    same endpoint, as a shadow or a weighted production variant (docs/experiments.md)."""


ExperimentMode = Literal["shadow", "split"]


class CandidateSpec(_Strict):
    """The candidate's speculative settings: each field given replaces the incumbent's."""

    mode: SpeculativeMode | None = None
    """`p-eagle` or `eagle3` (both variants must draft: the metric lines come from drafting)."""
    num_speculative_tokens: int | None = Field(default=None, ge=1)
    """K of the candidate."""
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = None
    """A K schedule for the candidate (`mode: eagle3` only, as for the incumbent)."""
    drafter_uri: str | None = None
    """Another drafter (S3 prefix), e.g. a plain EAGLE-3 head."""
    drafter_kind: DrafterKind | None = None
    """Kind of that drafter; parallel drafting needs `p-eagle`."""


class GuardrailSpec(_Strict):
    """When the candidate is stopped early and the incumbent restored.

    Each guardrail is a sequential test over everything since the start (not a recent
    window), so a failing candidate is stopped at low traffic too; it fires only on
    evidence, at most `alpha` of the time for a candidate within its limits."""

    max_error_rate_percent: float = Field(default=1.0, ge=0, le=100, strict=True)
    """The candidate's 5xx rate (Invocation5XXErrors / Invocations since the start) that
    is tolerated: the guardrail fires once the evidence says the candidate's rate is above
    this and above the incumbent's."""
    max_p99_latency_increase_percent: float = Field(default=50.0, ge=0, le=1000, strict=True)
    """How far the candidate's p99 time to first token and p99 request latency may exceed
    the incumbent's (since the start): the guardrail fires once a lower bound of the
    candidate's p99 is above an upper bound of the incumbent's times 1 + this/100."""
    alpha: float = Field(default=0.01, gt=0, le=0.2, strict=True)
    """Each guardrail's chance of stopping, over the whole experiment, a candidate that is
    within its limits."""


class ExperimentSpec(_Strict):
    """A candidate against the incumbent on live traffic, and how a winner is decided."""

    mode: ExperimentMode = "shadow"
    """`shadow`: the candidate gets a copy of the requests and its answers are discarded;
    `split`: the candidate answers half of the requests itself."""
    candidate: CandidateSpec = Field(default_factory=CandidateSpec)
    """The candidate's speculative settings (the rest is the incumbent's spec); empty
    with `calibration: true`."""
    calibration: bool = Field(default=False, strict=True)
    """An A/A run: the candidate is a copy of the incumbent (leave `candidate` empty). It
    never promotes; it measures how far two copies differ on this endpoint's traffic,
    whether the rule would have declared a false winner, and whether the blocks are long
    enough (docs/experiments.md)."""
    sampling_percent: int | None = Field(default=None, ge=1, le=100, strict=True)
    """Shadow mode: the share of requests copied to the candidate; the decision needs 100
    (the default): the candidate's instances then carry the incumbent's load."""
    weight_percent: int | None = Field(default=None, ge=1, le=99, strict=True)
    """Split mode: the share of requests the candidate answers; the decision needs 50
    (the default) on as many instances as the incumbent."""
    candidate_instance_count: int | None = Field(default=None, ge=1, le=AWS_INT_MAX, strict=True)
    """The candidate's instances; the decision needs the incumbent's count (the default
    for shadow 100 % and split 50 %)."""
    alpha: float = Field(default=0.05, gt=0, le=0.2, strict=True)
    """The chance of promoting a candidate that is no faster, while its instances differ
    from the incumbent's by no more than `instance_spread_percent` (or what the instances
    show) allows for: the interval is the blocks' confidence sequence at level 1 - alpha,
    widened by the one-sided 1 - alpha bound of the fleets' difference."""
    margin_percent: float = Field(default=2.0, ge=0, le=100, strict=True)
    """Promote only when the lower bound of the candidate's decode speed gain is above
    this (and keep the incumbent when the upper bound is below it): the smallest gain
    worth a change. It also covers instances that differ a little more than
    `instance_spread_percent` says."""
    instance_spread_percent: float = Field(default=1.5, ge=0, le=25, strict=True)
    """How much instances of one type differ in decode speed: the sd of their fixed
    offsets, in percent (GPUs of a type differ by a percent or two: clocks, thermals,
    placement). Two fleets then differ by sd spread x sqrt(1/M_i + 1/M_c) (M: each
    fleet's instances) however long the test runs, and the rule widens its interval by
    that. It uses the larger of this and what the instances themselves show (fleets of
    two or more); a calibration (A/A) run measures it on your endpoint."""
    expected_requests_per_minute: float | None = Field(default=None, gt=0, le=1e6, strict=True)
    """The endpoint's traffic, for the plan only: it shows, per set-up, whether each block
    would hold enough of the candidate's requests to count (the decision needs 10 per
    variant and block)."""
    block_minutes: float = Field(default=60.0, gt=0, le=1440, strict=True)
    """The test compares block means: each variant's decode speed pooled over this many
    minutes, one log ratio per block. Long blocks make the ratios nearly independent
    despite drift and autocorrelation from minute to minute; at least the container's
    metric interval (PEAGLE_METRICS_INTERVAL_SECONDS, 60 s)."""
    cycle_minutes: float = Field(default=1440.0, gt=0, le=43200, strict=True, validate_default=True)
    """One traffic cycle (a day): the rule decides only at the end of a whole number of
    cycles, so every hour of the day weighs the same and the start time cannot pick the
    winner of an effect that depends on load. A multiple of `block_minutes`."""
    max_duration_minutes: float = Field(
        default=4320.0, gt=0, le=43200, strict=True, validate_default=True
    )
    """Without a decision by then, the experiment ends and the incumbent stays; at least
    one `cycle_minutes`."""
    guardrails: GuardrailSpec = Field(default_factory=GuardrailSpec)
    """Error-rate and latency limits that end the experiment early."""

    @field_validator("sampling_percent")
    @classmethod
    def _sampling_only_for_shadow(cls, value: object, info: ValidationInfo) -> object:
        if value is not None and info.data.get("mode") == "split":
            raise PydanticCustomError(
                "experiment_mode", "is for shadow mode", {"allowed": "weight_percent in split mode"}
            )
        return value

    @field_validator("weight_percent")
    @classmethod
    def _weight_only_for_split(cls, value: object, info: ValidationInfo) -> object:
        if value is not None and info.data.get("mode") == "shadow":
            raise PydanticCustomError(
                "experiment_mode",
                "is for split mode",
                {"allowed": "sampling_percent in shadow mode"},
            )
        return value

    @field_validator("cycle_minutes")
    @classmethod
    def _whole_blocks(cls, value: float, info: ValidationInfo) -> float:
        block = info.data.get("block_minutes")
        if not isinstance(block, int | float) or block <= 0:
            return value  # block_minutes is refused on its own
        blocks = value / block
        if blocks < 1 or abs(blocks - round(blocks)) > 1e-6 * blocks:
            raise PydanticCustomError(
                "experiment_cycle",
                f"{value:g} is not a whole number of blocks of {block:g} minutes",
                {"allowed": f"a multiple of block_minutes ({block:g})"},
            )
        return value

    @field_validator("max_duration_minutes")
    @classmethod
    def _max_after_a_cycle(cls, value: float, info: ValidationInfo) -> float:
        cycle = info.data.get("cycle_minutes")
        if isinstance(cycle, int | float) and value < cycle:
            raise PydanticCustomError(
                "experiment_duration",
                f"{value:g} is shorter than one cycle_minutes ({cycle:g}): the rule decides "
                "only at the end of a cycle",
                {"allowed": f">= {cycle:g}"},
            )
        return value

    @property
    def share(self) -> float:
        """The candidate's share of the requests, 0-1 (mirrored or answered)."""
        if self.mode == "shadow":
            return (self.sampling_percent or 100) / 100
        return (self.weight_percent or 50) / 100

    def candidate_instances(self, incumbent_instances: int) -> int:
        """The candidate's instances: given, else as many as give it the incumbent's load
        per instance (shadow: count x share; split: count x w / (1 - w)), at least one."""
        if self.candidate_instance_count is not None:
            return self.candidate_instance_count
        ratio = self.share if self.mode == "shadow" else self.share / (1 - self.share)
        return max(1, round(incumbent_instances * ratio))


RETIRED_EXPERIMENT_FIELDS = ("min_duration_minutes", "min_requests", "window_seconds")
RETIRED_GUARDRAIL_FIELDS = ("window_minutes", "min_requests")
"""The knobs of the decision rule before issue 30 (a minimum duration and request count,
per-minute paired windows, the guardrails' recent window): gone with that rule."""


def without_retired_fields(experiment: dict[str, Any]) -> dict[str, Any]:
    """An experiment block stored before issue 30 (an experiment record), readable now.

    The retired knobs are dropped; a stored maximum shorter than the default cycle
    becomes the cycle (with hourly blocks when it is a whole number of hours), so the
    record reads and the experiment can be seen, concluded or aborted. For stored
    records only: a spec file that names a retired field is refused (unknown field).
    """
    block = {k: v for k, v in experiment.items() if k not in RETIRED_EXPERIMENT_FIELDS}
    rules = block.get("guardrails")
    if isinstance(rules, dict):
        block["guardrails"] = {k: v for k, v in rules.items() if k not in RETIRED_GUARDRAIL_FIELDS}
    longest = block.get("max_duration_minutes")
    default_cycle = ExperimentSpec.model_fields["cycle_minutes"].default
    if (
        isinstance(longest, int | float)
        and "cycle_minutes" not in block
        and longest < default_cycle
    ):
        block["cycle_minutes"] = float(longest)
        block.setdefault("block_minutes", 60.0 if longest % 60 == 0 else float(longest))
    return block


DeploymentSpec.model_rebuild()
