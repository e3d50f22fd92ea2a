"""`peagle bench`: closed-loop concurrency sweeps against P-EAGLE endpoints.

Stable API (the promotion gates of issue 6 build on it; keep signatures compatible):

- `BenchSettings(concurrency=[...], num_prompts=..., duration_s=..., warmup=...,
  max_tokens=..., temperature=..., dataset="humaneval"|path, seed=...)` (the sweep knobs,
  shared with the promotion gates) and `SweepConfig(settings=BenchSettings(...),
  hourly_price=..., workers=..., progress=...)` (one run)
- `target_from_string("http://host:port/v1" | "endpoint:NAME", label=..., model=...,
  region=...) -> OpenAITarget | SageMakerTarget`
- `run_sweep(target, config | settings, progress=listener) -> SweepResult` (sync) /
  `await run_sweep_async(...)`; `listener` is any `SweepProgress` (`RichProgress` draws
  bars and the --logs-delay countdown)
- `SweepResult.level(concurrency) -> LevelResult`; `LevelResult.output_throughput`,
  `LevelResult.get("p99_ttft_ms")` (any `vllm bench serve` metric name);
  `SweepResult.to_dict()` / `SweepResult.from_dict()` (the results JSON).
"""

from peagle_deploy.bench.datasets import Dataset, load_dataset
from peagle_deploy.bench.metrics import AcceptanceStats, RequestOutput
from peagle_deploy.bench.progress import NoProgress, RichProgress, SweepProgress
from peagle_deploy.bench.runner import LevelResult, SweepResult, run_sweep, run_sweep_async
from peagle_deploy.bench.settings import DEFAULT_LEVELS, BenchSettings, SweepConfig
from peagle_deploy.bench.targets import (
    OpenAITarget,
    SageMakerTarget,
    Target,
    target_from_string,
)

__all__ = [
    "DEFAULT_LEVELS",
    "AcceptanceStats",
    "BenchSettings",
    "Dataset",
    "LevelResult",
    "NoProgress",
    "OpenAITarget",
    "RequestOutput",
    "RichProgress",
    "SageMakerTarget",
    "SweepConfig",
    "SweepProgress",
    "SweepResult",
    "Target",
    "load_dataset",
    "run_sweep",
    "run_sweep_async",
    "target_from_string",
]
