"""The gate report inside the manifest: round trip, and SSM's 8 KB parameter limit."""

from __future__ import annotations

import pytest

from peagle_deploy.errors import PeagleError
from peagle_deploy.plan import build_plan
from peagle_deploy.promote.evaluate import (
    GateReport,
    LevelMeasurement,
    SmokeOutcome,
    evaluate_gates,
)
from peagle_deploy.promote.gates import StageGates
from peagle_deploy.promote.store import (
    MAX_PARAMETER_BYTES,
    promotion_manifest,
    recorded_report,
)
from peagle_deploy.spec import load_spec

ROLE = "arn:aws:iam::123456789012:role/peagle-store-test"


def _plan(**overrides: object):
    return build_plan(
        load_spec(
            None,
            model="qwen3-coder-30b-a3b-instruct",
            stage="prod",
            execution_role_arn=ROLE,
            **overrides,
        )
    )


def _report(levels: list[int]) -> GateReport:
    gates = StageGates.model_validate(
        {
            "bench": {"concurrency": levels},
            "thresholds": {
                "min_output_throughput": 1,
                "min_throughput_ratio": 0.9,
                "max_p99_ttft_ms": 5000,
                "min_acceptance_length": 1.2,
            },
        }
    )
    measured = [
        LevelMeasurement(
            concurrency=c,
            output_throughput=100.0 * c,
            p99_ttft_ms=50.0 + c,
            completed=32,
            failed=0,
            spec_decode_acceptance_length=2.5,
        )
        for c in levels
    ]
    results = evaluate_gates(
        gates,
        SmokeOutcome(text="ok"),
        measured,
        baseline={c: 90.0 * c for c in levels},
        baseline_from="prod/x",
    )
    return GateReport(
        source_stage="staging",
        target_stage="prod",
        source_endpoint="x-staging",
        results=results,
        measurements=measured,
        baseline_from="prod/x",
    )


def _size(manifest: object) -> int:
    return len(manifest.model_dump_json().encode())  # type: ignore[attr-defined]


def test_full_report_round_trips_through_the_manifest() -> None:
    report = _report([1, 4, 8, 32, 128])  # the default levels, every threshold
    manifest = promotion_manifest(_plan(), report, "staging/x-staging", git_commit="abc")
    assert _size(manifest) <= MAX_PARAMETER_BYTES
    again = recorded_report(manifest)
    assert again is not None
    assert again.results == report.results
    assert again.measurements == report.measurements
    assert again.baseline_from == "prod/x" and again.source_stage == "staging"


def test_oversized_report_keeps_the_baseline_and_drops_gate_rows() -> None:
    report = _report(list(range(1, 21)))  # 20 levels x 5 gates: over 8 KB in full
    manifest = promotion_manifest(_plan(), report, "staging/x-staging", git_commit="abc")
    assert _size(manifest) <= MAX_PARAMETER_BYTES
    meta = manifest.gate_results[0]
    assert meta["gates"] == len(report.results) and "gate_rows_omitted" in meta
    again = recorded_report(manifest)
    assert again is not None and again.results == []
    assert again.measurements == report.measurements  # the next baseline survives


def test_a_manifest_that_cannot_fit_stops_before_deploying() -> None:
    env = {f"EXTRA_{i}": "x" * 200 for i in range(60)}  # ~13 KB of container env
    with pytest.raises(PeagleError, match="over SSM's 8192-byte parameter limit"):
        promotion_manifest(_plan(env=env), _report([1]), "staging/x-staging", git_commit="abc")
