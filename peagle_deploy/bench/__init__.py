"""`peagle bench`: closed-loop concurrency sweeps against P-EAGLE endpoints.

Stable API (the promotion gates of issue 6 build on it; keep signatures compatible):

- `SweepConfig(concurrency=[...], num_prompts=..., duration_s=..., warmup=...,
  max_tokens=..., temperature=..., dataset="humaneval"|path, seed=..., hourly_price=...,
  progress=..., workers=...)`
- `target_from_string("http://host:port/v1" | "endpoint:NAME", label=..., model=...,
  region=...) -> OpenAITarget | SageMakerTarget`
- `run_sweep(target, config, progress=listener) -> SweepResult` (sync) /
  `await run_sweep_async(...)`; `listener` is any `SweepProgress` (`RichProgress` draws
  bars and the --logs-delay countdown)
- `SweepResult.level(concurrency) -> LevelResult`; `LevelResult.output_throughput`,
  `LevelResult.get("p99_ttft_ms")` (any `vllm bench serve` metric name);
  `SweepResult.to_dict()` / `SweepResult.from_dict()` (the results JSON).
"""

from peagle_deploy.bench.datasets import Dataset, load_dataset
from peagle_deploy.bench.metrics import RequestOutput, SpecDecodeStats
from peagle_deploy.bench.progress import NoProgress, RichProgress, SweepProgress
from peagle_deploy.bench.runner import (
    DEFAULT_LEVELS,
    LevelResult,
    SweepConfig,
    SweepResult,
    run_sweep,
    run_sweep_async,
)
from peagle_deploy.bench.targets import (
    OpenAITarget,
    SageMakerTarget,
    Target,
    target_from_string,
)

__all__ = [
    "DEFAULT_LEVELS",
    "Dataset",
    "LevelResult",
    "NoProgress",
    "OpenAITarget",
    "RequestOutput",
    "RichProgress",
    "SageMakerTarget",
    "SpecDecodeStats",
    "SweepConfig",
    "SweepProgress",
    "SweepResult",
    "Target",
    "load_dataset",
    "run_sweep",
    "run_sweep_async",
    "target_from_string",
]
