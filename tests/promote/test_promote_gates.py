"""The gates file: defaults, per-level thresholds, and errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from peagle_deploy.errors import InputError
from peagle_deploy.promote.gates import GatesFile, load_gates, parse_gates

REPO = Path(__file__).resolve().parents[2]


def test_example_gates_file_loads_and_covers_staging_and_prod() -> None:
    gates = load_gates(REPO / "gates.example.yaml")
    assert set(gates.stages) >= {"staging", "prod"}
    prod = gates.for_stage("prod")
    assert prod.bench is not None
    # prod is at least as strict as staging on errors
    assert prod.thresholds.max_error_rate <= gates.for_stage("staging").thresholds.max_error_rate


def test_defaults_and_per_level_thresholds() -> None:
    gates = parse_gates(
        {
            "stages": {
                "staging": {
                    "bench": {"concurrency": [8, 1]},
                    "thresholds": {
                        "min_output_throughput": {1: 500, 8: 3000},
                        "max_p99_ttft_ms": 900,
                    },
                }
            }
        }
    )
    stage = gates.for_stage("staging")
    assert stage.smoke.enabled is True
    assert stage.bench is not None and stage.bench.concurrency == [1, 8]
    t = stage.thresholds
    assert t.level_value("min_output_throughput", 8) == 3000
    assert t.level_value("min_output_throughput", 4) is None
    assert t.level_value("max_p99_ttft_ms", 4) == 900
    assert t.max_error_rate == 0.0


@pytest.mark.parametrize(
    ("doc", "field", "fragment"),
    [
        (
            {"stages": {"staging": {"thresholds": {"max_eror_rate": 0.1}}}},
            "gates.stages.staging.thresholds.max_eror_rate",
            "max_error_rate",
        ),
        (
            {"stages": {"staging": {"thresholds": {"max_error_rate": 1.5}}}},
            "gates.stages.staging.thresholds.max_error_rate",
            "less than or equal to 1",
        ),
        ({"stages": {"Prod!": {}}}, "gates.stages.Prod!", "lowercase"),
        (
            {"stages": {"staging": {"bench": {"concurrency": [0, 4]}}}},
            "gates.stages.staging.bench.concurrency",
            "between 1 and 4096",
        ),
        (
            {"stages": {"staging": {"bench": None, "thresholds": {"max_p99_ttft_ms": 100}}}},
            "gates.stages.staging",
            "need a `bench` block",
        ),
        (
            {
                "stages": {
                    "staging": {
                        "bench": {"concurrency": [1]},
                        "thresholds": {"min_output_throughput": {8: 10}},
                    }
                }
            },
            "gates.stages.staging",
            "concurrency [8]",
        ),
        (
            {"stages": {"staging": {"thresholds": {"min_output_throughput": -3}}}},
            "gates.stages.staging.thresholds.min_output_throughput",
            "positive",
        ),
        ({"version": 2, "stages": {"staging": {}}}, "gates.version", "1"),
        ({"stages": {}}, "gates.stages", "at least 1"),
    ],
)
def test_bad_gates_name_the_field(doc: dict, field: str, fragment: str) -> None:
    with pytest.raises(InputError) as info:
        parse_gates(doc)
    assert info.value.field == field
    assert fragment in str(info.value)


def test_unknown_stage_lists_defined_stages() -> None:
    gates = GatesFile.model_validate({"stages": {"staging": {}, "prod": {}}})
    with pytest.raises(InputError) as info:
        gates.for_stage("qa")
    assert "prod, staging" in str(info.value)


def test_missing_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_gates(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("stages:\n  staging: [unclosed\n")
    with pytest.raises(InputError, match=r"line \d+: not valid YAML") as info:
        load_gates(bad)
    assert info.value.field == "--gates"
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(InputError, match="mapping"):
        load_gates(listy)
