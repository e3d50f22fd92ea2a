"""One bench-settings model for `peagle bench` and the promotion gates."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from peagle_deploy.bench.settings import DEFAULT_LEVELS, BenchSettings
from peagle_deploy.errors import SpecError
from peagle_deploy.promote.gates import GATE_BENCH_DEFAULTS, parse_gates


def test_defaults_are_the_bench_cli_ones_and_levels_are_checked() -> None:
    settings = BenchSettings()
    assert settings.concurrency == list(DEFAULT_LEVELS)
    assert (settings.num_prompts, settings.duration_s, settings.warmup) == (None, None, 2)
    assert BenchSettings(concurrency=[8, 1]).concurrency == [1, 8]
    for bad in ([], [0], [1, 1], [5000]):
        with pytest.raises(ValidationError):
            BenchSettings(concurrency=bad)
    with pytest.raises(ValidationError):
        BenchSettings(num_prompts=10, bogus=1)  # type: ignore[call-arg]


def test_the_gates_bench_block_is_the_same_model_with_quicker_defaults() -> None:
    gates = parse_gates(
        {
            "stages": {
                "staging": {"bench": {"concurrency": [2], "duration_s": 30}},
                "prod": {},
            }
        }
    )
    staging = gates.for_stage("staging").bench
    assert isinstance(staging, BenchSettings)
    assert staging.concurrency == [2] and staging.duration_s == 30
    assert (staging.num_prompts, staging.warmup) == (16, 1)  # the gates' defaults fill in
    assert gates.for_stage("prod").bench == BenchSettings(**GATE_BENCH_DEFAULTS)
    with pytest.raises(SpecError) as caught:
        parse_gates({"stages": {"prod": {"bench": {"warmup": -1}}}})
    assert caught.value.field == "gates.stages.prod.bench.warmup"
