"""One bench-settings model for `peagle bench` and the promotion gates."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from start_up_probe import modules_loaded

from peagle_deploy.bench.settings import DEFAULT_LEVELS, BenchSettings
from peagle_deploy.errors import InputError
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
    with pytest.raises(InputError) as caught:
        parse_gates({"stages": {"prod": {"bench": {"warmup": -1}}}})
    assert caught.value.field == "gates.stages.prod.bench.warmup"


def test_the_clis_flag_table_is_the_models() -> None:
    """bench/flag_table.json is data written from the models; after editing them,
    regenerate it with `python -m peagle_deploy.bench.settings`."""
    from peagle_deploy.bench.settings import FLAG_TABLE, flag_table_json

    assert FLAG_TABLE.read_text(encoding="utf-8") == flag_table_json()


def test_every_sweep_knob_is_a_flag_with_the_models_default_and_docstring(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from peagle_deploy.bench.settings import SweepConfig, sweep_flags
    from peagle_deploy.cli.app import main

    rows = {row.keyword: row for row in sweep_flags()}
    assert set(BenchSettings.model_fields) <= set(rows)  # every sweep knob has its flag
    assert {"hourly_price", "workers"} <= set(rows) and "progress" not in rows
    for name, row in rows.items():
        model = BenchSettings if name in BenchSettings.model_fields else SweepConfig
        info = model.model_fields[name]
        assert row.default == info.get_default(call_default_factory=True)
        assert row.doc and row.doc.split()[0] in (info.description or "")
    for command in (["bench"], ["bench", "compare"]):
        assert main([*command, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.replace("│", " ").split())
        for row in rows.values():
            assert all(name in text for name in row.decls)
            assert " ".join(row.doc.split()[:4]) in text
    assert "Default: 1,4,8,32,128." in text


def test_cli_values_reach_the_model_as_typed_and_refusals_name_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from peagle_deploy.cli.app import main

    url = "http://127.0.0.1:9/v1"  # never contacted: every case is refused first
    for argv, flag in (
        (["--num-prompts", "0"], "--num-prompts"),
        (["-n", "many"], "--num-prompts"),
        (["--duration", "inf"], "--duration"),
        (["-c", "4,4"], "--concurrency"),
        (["-c", "5000"], "--concurrency"),
        (["--temperature", "nan"], "--temperature"),
        (["--seed", "-1"], "--seed"),
        (["--hourly-price", "-2"], "--hourly-price"),
    ):
        assert main(["bench", "--url", url, *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {flag}: ") and err.count("\n") == 1


def test_cli_start_up_builds_no_bench_model() -> None:
    """`peagle --help` lists `bench` without building it (nor pydantic); `peagle bench
    --help` builds its options from flag_table.json, not from the settings models."""

    names = ("pydantic", "peagle_deploy.bench.settings", "peagle_deploy.cli.bench")
    assert modules_loaded(["--help"], names) == []
    bench = ("peagle_deploy.bench.settings", "peagle_deploy.cli.bench")
    assert modules_loaded(["bench", "--help"], bench) == ["peagle_deploy.cli.bench"]
