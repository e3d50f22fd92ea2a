"""`--workers N`: shares, exact merging, and real worker processes against the loopback."""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator
from typing import Any

import pytest
from peagle_local.emulator.loopback import LoopbackConfig, LoopbackServer, serve_in_thread

from peagle_deploy.bench import OpenAITarget, SweepConfig, run_sweep
from peagle_deploy.bench.closed_loop import LevelRun
from peagle_deploy.bench.datasets import Dataset
from peagle_deploy.bench.metrics import RequestOutput, level_metrics
from peagle_deploy.bench.settings import sweep_config
from peagle_deploy.bench.workers import merge_runs, plan_shares, split_evenly, split_like
from peagle_deploy.errors import InputError

PROMPTS = Dataset("p", tuple([[{"role": "user", "content": f"prompt {i}"}] for i in range(10)]))


def test_shares_add_up_and_idle_workers_sit_out() -> None:
    assert split_evenly(128, 3) == [43, 43, 42]
    assert split_like(1536, [43, 43, 42]) == [516, 516, 504]
    assert sum(split_like(7, [3, 3, 1])) == 7
    shares = plan_shares(4, 2, 10, 3)  # concurrency 2 over 4 workers: two sit out
    assert sorted(shares) == [0, 1]
    assert [s.concurrency for s in shares.values()] == [1, 1]
    assert sum(s.requests or 0 for s in shares.values()) == 10
    assert sum(s.warmup for s in shares.values()) == 3
    assert [(s.rank, s.active) for s in shares.values()] == [(0, 2), (1, 2)]
    timed = plan_shares(3, 8, None, 0)
    assert [s.requests for s in timed.values()] == [None, None, None]


def _known_outputs(n: int) -> list[RequestOutput]:
    rng = random.Random(7)
    outs = []
    for i in range(n):
        ttft = rng.choice([0.01, 0.05, 0.2]) * (1 + rng.random())
        itl = [rng.expovariate(500.0) for _ in range(rng.randint(1, 30))]
        start = i * 0.01
        outs.append(
            RequestOutput(
                success=i % 17 != 0,
                error=None if i % 17 else "HTTP 500: boom",
                start_time=start,
                ttft=ttft,
                latency=ttft + sum(itl),
                itl=itl,
                output_tokens=len(itl) + 1,
                prompt_tokens=5,
            )
        )
    return outs


def test_merged_metrics_are_the_metrics_of_all_samples() -> None:
    outs = _known_outputs(300)
    one_process = LevelRun(outs, 0.0, max(o.end_time for o in outs))
    expected = level_metrics(one_process.outputs, one_process.duration)
    # Split unevenly over three workers by a skewed rule, so per-worker distributions differ.
    parts = [[o for o in outs if o.ttft < 0.05], [o for o in outs if 0.05 <= o.ttft < 0.2]]
    parts.append([o for o in outs if o.ttft >= 0.2])
    runs = [LevelRun(p, min(o.start_time for o in p), max(o.end_time for o in p)) for p in parts]
    merged = merge_runs(runs)
    assert merged.duration == pytest.approx(one_process.duration)
    assert level_metrics(merged.outputs, merged.duration) == expected
    # What exact merging protects against: the mean of per-worker p99s is another number.
    per_worker_p99 = [level_metrics(r.outputs, r.duration)["p99_ttft_ms"] for r in runs]
    assert statistics.mean(per_worker_p99) != pytest.approx(expected["p99_ttft_ms"], rel=0.05)


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with serve_in_thread(LoopbackConfig(ttft_s=0.005, token_delay_s=0.001)) as srv:
        yield srv


def _config(**kw: Any) -> SweepConfig:
    base: dict[str, Any] = {"warmup": 2, "max_tokens": 6, "workers": 2}
    base.update(kw)
    return sweep_config(base, progress=False)


def test_two_worker_processes_run_every_request_once(server: LoopbackServer) -> None:
    before = server.counters.requests
    result = run_sweep(
        OpenAITarget(server.url), _config(concurrency=[1, 5], num_prompts=9), dataset=PROMPTS
    )
    assert result.label == "loopback"
    assert result.config["workers"] == 2
    for lv in result.levels:
        d = lv.to_dict()
        assert d["completed"] == 9
        assert d["failed"] == 0
        assert d["total_output_tokens"] == 9 * 6
        assert d["p99_ttft_ms"] >= 5.0
    # 9 measured + 2 warm-up requests per level, nothing more, nothing lost.
    assert server.counters.requests - before == 2 * (9 + 2)


def test_duration_levels_share_one_deadline(server: LoopbackServer) -> None:
    result = run_sweep(
        OpenAITarget(server.url), _config(concurrency=[4], duration_s=0.4), dataset=PROMPTS
    )
    d = result.levels[0].to_dict()
    assert d["completed"] > 4
    # One deadline for the level, not one per worker: the level ends near 0.4 s. Bounds
    # are loose on purpose (a loaded machine starts workers late); this is no speed test.
    assert 0.0 < d["duration_s"] < 4.0


def test_targets_without_clone_cannot_use_workers() -> None:
    class Bare:
        label = "bare"
        description = "bare"

        async def start(self, max_concurrency: int) -> None: ...

        async def request(self, *args: Any) -> RequestOutput:
            raise AssertionError("never called")

        async def acceptance_mark(self) -> None: ...

        async def acceptance_stats(self, begin: Any, end: Any) -> None: ...

        async def close(self) -> None: ...

    with pytest.raises(InputError) as err:
        run_sweep(Bare(), _config(concurrency=[2], num_prompts=2), dataset=PROMPTS)
    assert err.value.field == "--workers"
    with pytest.raises(InputError) as err:
        sweep_config({"workers": 65})
    assert err.value.field == "--workers"
