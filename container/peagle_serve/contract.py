"""The contract between the SageMaker side (SDK, CDK) and the serving container.

Standard library only: the container installs this package without peagle_deploy, and
peagle_deploy / infra import it so that both sides share one definition of paths,
variable names and the speculative-decoding metric line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

# --- Where SageMaker mounts things (docs/platform-facts.md, SageMaker API) ------------
MODEL_DIR: Final = "/opt/ml/model"
ADDITIONAL_DATA_ROOT: Final = "/opt/ml/additional-model-data-sources"
DEFAULT_DRAFTER_CHANNEL: Final = "eagle"
SERVING_PORT: Final = 8080

# --- Environment variables the AWS vLLM images read (docs/container.md) ---------------
SM_VLLM_PREFIX: Final = "SM_VLLM_"
SPECULATIVE_CONFIG_ENV: Final = "SM_VLLM_SPECULATIVE_CONFIG"
MODEL_ENV: Final = "SM_VLLM_MODEL"
HF_MODEL_ID_ENV: Final = "HF_MODEL_ID"
# Only 8080: SageMaker sends traffic there (peagle_serve.envargs refuses another port).
PORT_ENV: Final = SM_VLLM_PREFIX + "PORT"
# Seconds between two reads of vLLM's /metrics by the container's acceptance reporter.
METRICS_INTERVAL_ENV: Final = "PEAGLE_METRICS_INTERVAL_SECONDS"
# How many parallel tokens the drafter was trained for (e.g. the catalog's
# drafter_parallel_tokens); the container's preflight warns when K is above it. Only
# the peagle-deploy image reads it; the stock AWS image ignores it.
DRAFTER_TRAINED_TOKENS_ENV: Final = "PEAGLE_DRAFTER_TRAINED_TOKENS"
# Seconds vLLM gets after a forwarded SIGTERM before its process group is killed.
STOP_GRACE_ENV: Final = "PEAGLE_STOP_GRACE_SECONDS"
# The three above are numeric: peagle_serve.numeric_env holds their one rule.


def drafter_mount_path(channel: str = DEFAULT_DRAFTER_CHANNEL) -> str:
    """Path at which SageMaker mounts an additional model data source channel."""
    return f"{ADDITIONAL_DATA_ROOT}/{channel}"


# --- vLLM rules the plan and the container's preflight both enforce -----------------
# vLLM's switch to its V2 model runner, which has no parallel drafting (it fell back to
# sequential drafting; newer vLLM refuses the combination). P-EAGLE needs it off.
V2_RUNNER_ENV: Final = "VLLM_USE_V2_MODEL_RUNNER"
K_SCHEDULE_FIELD: Final = "num_speculative_tokens_per_batch_size"

# P-EAGLE gets ONE K, never a per-batch-size schedule, on an engine without this fix.
# Read in vLLM 0.30.0's wheel (`vllm/v1/spec_decode/llm_base_proposer.py`): with
# `parallel_drafting` the drafter sets `extra_slots_per_request = num_speculative_tokens`
# once, in `__init__`, from the largest K, and sizes its sampled slots as
# `batch_size * extra_slots_per_request`; `propose()` first sets `num_speculative_tokens`
# to the K the scheduler chose for the step and the parallel path returns
# `draft_token_ids.view(-1, self.num_speculative_tokens)`, so a step scheduled with a
# smaller K reshapes K_max slots per request with K. Which releases carry the fix is
# data (catalog/data/engines.json, `k_schedule_with_parallel_drafting`, detected by
# scripts/platform_facts.py; docs/platform-facts.md). The plan refuses the combination
# per engine; `peagle bench recommend-k`, which does not know the engine, never suggests
# a schedule for P-EAGLE. Both say why with `one_k_reason`.
PARALLEL_DRAFTING_K_FIX: Final = "vllm-project/vllm#45695"
ONE_K_ALLOWED: Final = (
    "one K (num_speculative_tokens) with mode p-eagle, or the schedule with mode eagle3"
)


def one_k_reason(engine: str, *, known: bool = True) -> str:
    """Why a per-batch-size K schedule with parallel drafting is refused on `engine`
    (e.g. `vLLM 0.30.0`): `known` says the engine is known to lack the fix, otherwise
    only not known to have it."""
    why = (
        "vLLM's parallel drafter sizes its draft slots once from the largest K and "
        "reshapes them with the K scheduled for the step"
    )
    if known:
        return (
            f"a per-batch-size K with parallel drafting (mode p-eagle) breaks the draft "
            f"shapes in {engine}: {why} (the fix, {PARALLEL_DRAFTING_K_FIX}, is not in it)"
        )
    return (
        f"a per-batch-size K with parallel drafting (mode p-eagle) breaks the draft shapes "
        f"unless the engine has {PARALLEL_DRAFTING_K_FIX} ({why}), and {engine} is not "
        "known to have it"
    )


def env_flag(value: str) -> bool | None:
    """An environment switch as vLLM reads it: True, False, or None when unrecognised."""
    v = value.strip().lower()
    if v in {"1", "true", "yes", "on"}:
        return True
    if v in {"0", "false", "no", "off", ""}:
        return False
    return None


def v2_runner_off(value: str | None) -> bool:
    """Whether V2_RUNNER_ENV's value (None: unset) leaves parallel drafting possible."""
    return value is None or env_flag(value) is False


class KScheduleProblem:
    """What is wrong with a per-batch-size K schedule; `index` is the entry, if one."""

    __slots__ = ("index", "problem")

    def __init__(self, index: int | None, problem: str) -> None:
        self.index = index
        self.problem = problem

    def __repr__(self) -> str:
        return f"KScheduleProblem({self.index!r}, {self.problem!r})"


def k_schedule_allowed(num_speculative_tokens: int | None) -> str:
    """The allowed form of a schedule, for error messages."""
    top = f" <= {num_speculative_tokens} (num_speculative_tokens)" if num_speculative_tokens else ""
    return f"[[1, end, K], [end+1, end2, K2], ...] of integers with 0 <= K{top}"


def k_schedule_problem(
    schedule: object, num_speculative_tokens: int | None
) -> KScheduleProblem | None:
    """vLLM's rules for `[[start, end, K], ...]`, or None when the schedule is fine.

    vLLM (v1/spec_decode/dynamic/utils.py): a non-empty list of 3-item entries with
    1 <= start <= end and K >= 0; sorted by start, the ranges must not overlap and the
    first must start at 1. Stricter here: entries are integers, and K may not exceed
    num_speculative_tokens (vLLM silently caps it, so a larger K cannot mean what the
    user wrote).
    """
    if not isinstance(schedule, list | tuple) or not schedule:
        return KScheduleProblem(None, "must be a non-empty list of [start, end, K]")
    entries: list[tuple[int, int, int, int]] = []
    for i, entry in enumerate(schedule):
        if (
            not isinstance(entry, list | tuple)
            or len(entry) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in entry)
        ):
            shown = list(entry) if isinstance(entry, tuple) else entry
            return KScheduleProblem(i, f"entry {shown!r} is not [start, end, K] integers")
        start, end, k = entry
        if start < 1 or end < start:
            return KScheduleProblem(i, f"batch range {start}-{end} is empty or starts below 1")
        if k < 0:
            return KScheduleProblem(i, f"K={k} is negative")
        if num_speculative_tokens is not None and k > num_speculative_tokens:
            return KScheduleProblem(
                i, f"K={k} is above num_speculative_tokens ({num_speculative_tokens})"
            )
        entries.append((start, end, k, i))
    entries.sort()
    previous_end = 0
    for start, end, _, i in entries:
        if start <= previous_end:
            return KScheduleProblem(i, f"batch range {start}-{end} overlaps another range")
        previous_end = end
    if entries[0][0] != 1:
        return KScheduleProblem(
            entries[0][3], f"the first batch range starts at {entries[0][0]}, not 1"
        )
    return None


# --- The speculative-decoding metric line ------------------------------------------
# The container prints one JSON object per line to stdout (CloudWatch Logs). The same
# object is an Embedded Metric Format document (the `_aws` key), and its top-level
# fields are what the CDK stack's metric filters select with `{ $.event = ... }`.
METRIC_EVENT: Final = "peagle.spec_decode"
METRIC_NAMESPACE: Final = "PEagle/SpecDecode"
# The endpoint the line belongs to, so that several endpoints in one account and region
# keep separate metrics. The plan sets ENDPOINT_NAME_ENV in the model's environment; the
# dimension has the same name as in AWS/SageMaker metrics.
ENDPOINT_NAME_ENV: Final = "PEAGLE_ENDPOINT_NAME"
METRIC_DIMENSION: Final = "EndpointName"
# The production or shadow variant the container serves, as in AWS/SageMaker's
# EndpointName/VariantName dimensions, so two variants of one endpoint (an experiment)
# keep separate metrics. The plan sets VARIANT_NAME_ENV only on a candidate's model; a
# peagle endpoint's one production variant is DEFAULT_VARIANT.
VARIANT_NAME_ENV: Final = "PEAGLE_VARIANT_NAME"
VARIANT_DIMENSION: Final = "VariantName"
DEFAULT_VARIANT: Final = "AllTraffic"


def metric_dimensions(environ: Mapping[str, str]) -> dict[str, str]:
    """The metric line's dimensions for a container environment (none when unnamed)."""
    name = environ.get(ENDPOINT_NAME_ENV, "").strip()
    if not name:
        return {}
    variant = environ.get(VARIANT_NAME_ENV, "").strip() or DEFAULT_VARIANT
    return {METRIC_DIMENSION: name, VARIANT_DIMENSION: variant}


def metric_dimension_selector(dimension: str = METRIC_DIMENSION) -> str:
    """CloudWatch Logs metric-filter dimension expression for one dimension of the line."""
    return f"$.{dimension}"


class MetricField:
    """One numeric field of the metric line and the CloudWatch metric it becomes."""

    __slots__ = ("json_key", "metric_name", "unit")

    def __init__(self, json_key: str, metric_name: str, unit: str) -> None:
        self.json_key = json_key
        self.metric_name = metric_name
        self.unit = unit

    def __repr__(self) -> str:
        return f"MetricField({self.json_key!r}, {self.metric_name!r}, {self.unit!r})"


METRIC_FIELDS: Final[tuple[MetricField, ...]] = (
    MetricField("acceptance_rate", "AcceptanceRate", "None"),
    MetricField("mean_acceptance_length", "MeanAcceptanceLength", "None"),
    MetricField("draft_tokens_per_s", "DraftTokensPerSecond", "Count/Second"),
    MetricField("accepted_tokens_per_s", "AcceptedTokensPerSecond", "Count/Second"),
)


_ENDPOINT_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
"""SageMaker's EndpointName pattern (botocore): nothing a filter pattern would read."""


def metric_filter_pattern(endpoint_name: str | None = None) -> str:
    """CloudWatch Logs filter pattern that matches exactly the metric lines; with
    `endpoint_name`, only those that name that endpoint (`METRIC_DIMENSION`).

    A metric filter's dimension value can only be a field of the event (`$.EndpointName`;
    botocore's logs model: "The fields to use as dimensions"), so the filter of one
    endpoint's log group matches only lines naming that endpoint: a line naming another
    (an `env` override, an image of one's own) publishes nothing there.
    """
    if endpoint_name is None:
        return f'{{ $.event = "{METRIC_EVENT}" }}'
    if not _ENDPOINT_NAME.fullmatch(endpoint_name):
        raise ValueError(f"{endpoint_name!r} is not a SageMaker endpoint name")
    return f'{{ ($.event = "{METRIC_EVENT}") && ($.{METRIC_DIMENSION} = "{endpoint_name}") }}'


def metric_value_selector(field: MetricField) -> str:
    """CloudWatch Logs metric-filter value expression for one field."""
    return f"$.{field.json_key}"


# What the engine served over the same interval, for comparing variants (experiments):
# counts and sums of the interval, and per-bucket counts of vLLM's latency histograms
# (`peagle_serve.serving`). Data for tools, not CloudWatch metrics.
SERVING_KEY: Final = "serving"
SERVING_HISTOGRAMS: Final[tuple[tuple[str, str], ...]] = (
    ("ttft_s", "vllm:time_to_first_token_seconds"),
    ("itl_s", "vllm:inter_token_latency_seconds"),
    ("e2e_s", "vllm:e2e_request_latency_seconds"),
)
"""(line key, vLLM histogram): time to first token; the gap between two outputs of one
request (one per engine step, so one gap may carry several speculated tokens); the
whole request."""


def format_metric_line(
    values: Mapping[str, float],
    *,
    per_position_acceptance: list[float] | None = None,
    timestamp_ms: int,
    dimensions: Mapping[str, str] | None = None,
    serving: Mapping[str, Any] | None = None,
) -> str:
    """Render one metric line.

    `values` must hold every key of METRIC_FIELDS. Per-position acceptance rates are
    carried as a list (position 1 first); they are data for humans and tools, not
    CloudWatch metrics (the number of positions depends on K). `serving` is the
    interval's serving statistics (`SERVING_KEY`), when the engine exposes them.
    """
    missing = [f.json_key for f in METRIC_FIELDS if f.json_key not in values]
    if missing:
        raise ValueError(f"metric line is missing {', '.join(missing)}")
    dims = dict(dimensions or {})
    doc: dict[str, Any] = {
        "event": METRIC_EVENT,
        **{f.json_key: round(float(values[f.json_key]), 6) for f in METRIC_FIELDS},
        "acceptance_rate_per_position": [round(r, 6) for r in per_position_acceptance or []],
        **({SERVING_KEY: dict(serving)} if serving else {}),
        **dims,
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": METRIC_NAMESPACE,
                    "Dimensions": _dimension_sets(dims),
                    "Metrics": [{"Name": f.json_key, "Unit": f.unit} for f in METRIC_FIELDS],
                }
            ],
        },
    }
    return json.dumps(doc, separators=(",", ":"), sort_keys=False)


def _dimension_sets(dims: Mapping[str, str]) -> list[list[str]]:
    """EMF dimension sets: the endpoint's metrics as before, and per variant beside them
    (the CDK stack's metric filters keep the endpoint-wide series)."""
    if not dims:
        return [[]]
    sets = [sorted(dims)]
    if VARIANT_DIMENSION in dims and len(dims) > 1:
        sets.insert(0, sorted(k for k in dims if k != VARIANT_DIMENSION))
    return sets


def parse_metric_line(line: str) -> dict[str, Any] | None:
    """The metric document in a log line, or None when the line is something else."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("event") != METRIC_EVENT:
        return None
    return doc
