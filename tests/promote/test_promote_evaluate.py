"""Pure gate evaluation: each threshold passes, fails and skips where it should."""

from __future__ import annotations

from peagle_deploy.promote.evaluate import (
    GateReport,
    LevelMeasurement,
    SmokeOutcome,
    baseline_from_measurements,
    evaluate_gates,
)
from peagle_deploy.promote.gates import StageGates
from peagle_deploy.promote.report import report_json


def _gates(**thresholds: object) -> StageGates:
    return StageGates.model_validate({"bench": {"concurrency": [1, 4]}, "thresholds": thresholds})


def _level(
    c: int, tput: float, p99: float | None = 100.0, failed: int = 0, acc: float | None = None
) -> LevelMeasurement:
    return LevelMeasurement(
        concurrency=c,
        output_throughput=tput,
        p99_ttft_ms=p99,
        completed=10 - failed,
        failed=failed,
        spec_decode_acceptance_length=acc,
    )


OK = SmokeOutcome(text="def fib(n): ...")


def _by_name(results: list) -> dict:
    return {r.name: r for r in results}


def test_all_thresholds_pass() -> None:
    gates = _gates(
        min_output_throughput={1: 100, 4: 300},
        max_p99_ttft_ms=500,
        max_error_rate=0.1,
        min_acceptance_length=2.0,
        min_throughput_ratio=0.9,
    )
    results = evaluate_gates(
        gates, OK, [_level(1, 120, acc=2.5), _level(4, 350, acc=2.4)], baseline={1: 110, 4: 360}
    )
    assert [r.status for r in results] == ["pass"] * len(results)
    names = _by_name(results)
    assert set(names) == {
        "smoke",
        *(
            f"{k}@c{c}"
            for c in (1, 4)
            for k in (
                "error_rate",
                "output_throughput",
                "throughput_ratio",
                "p99_ttft_ms",
                "acceptance_length",
            )
        ),
    }
    assert names["output_throughput@c4"].required == ">= 300 tok/s"
    assert names["throughput_ratio@c4"].required.startswith(">= 324")


def test_each_threshold_fails_on_its_own() -> None:
    gates = _gates(
        min_output_throughput=200,
        max_p99_ttft_ms=500,
        max_error_rate=0.0,
        min_acceptance_length=2.0,
        min_throughput_ratio=0.95,
    )
    levels = [_level(1, 199.9, p99=501, failed=1, acc=1.9), _level(4, 400, acc=2.0)]
    results = _by_name(evaluate_gates(gates, OK, levels, baseline={1: 100, 4: 500}))
    failing = {n for n, r in results.items() if r.status == "fail"}
    assert failing == {
        "output_throughput@c1",
        "p99_ttft_ms@c1",
        "error_rate@c1",
        "acceptance_length@c1",
        "throughput_ratio@c4",  # 400 < 0.95 * 500
    }
    assert results["error_rate@c1"].measured == 0.1
    assert results["error_rate@c1"].detail == "1 failed of 10"


def test_ratio_and_acceptance_skip_without_data_unless_required() -> None:
    gates = _gates(min_throughput_ratio=0.9, min_acceptance_length=1.5)
    results = _by_name(evaluate_gates(gates, OK, [_level(1, 10), _level(4, 20)], baseline=None))
    assert results["throughput_ratio@c1"].status == "skip"
    assert results["acceptance_length@c4"].status == "skip"
    # The gates measure the source endpoint: the reason must not blame "the target".
    assert "measured endpoint" in results["acceptance_length@c4"].detail
    assert "target" not in results["acceptance_length@c4"].detail
    report = GateReport(
        source_stage="dev",
        target_stage="staging",
        source_endpoint="e",
        results=list(results.values()),
    )
    assert report.passed

    strict = _gates(min_acceptance_length=1.5, require_acceptance_length=True)
    results = _by_name(evaluate_gates(strict, OK, [_level(1, 10), _level(4, 20)]))
    assert results["acceptance_length@c1"].status == "fail"


def test_missing_level_and_empty_level_fail() -> None:
    gates = _gates()
    empty = LevelMeasurement(concurrency=1, output_throughput=0, completed=0, failed=0)
    results = _by_name(evaluate_gates(gates, OK, [empty]))
    assert results["error_rate@c1"].status == "fail"  # nothing measured is not 0% errors
    assert results["measured@c4"].status == "fail"


def test_no_ttft_fails_ttft_gate() -> None:
    results = _by_name(
        evaluate_gates(_gates(max_p99_ttft_ms=100), OK, [_level(1, 5, p99=None), _level(4, 5)])
    )
    assert results["p99_ttft_ms@c1"].status == "fail"
    assert results["p99_ttft_ms@c4"].status == "pass"


def test_smoke_gate() -> None:
    gates = _gates()
    levels = [_level(1, 5), _level(4, 5)]
    assert (
        _by_name(evaluate_gates(gates, SmokeOutcome(text="  \n"), levels))["smoke"].status == "fail"
    )
    err = _by_name(evaluate_gates(gates, SmokeOutcome(text="", error="ModelError: 500"), levels))
    assert err["smoke"].detail == "ModelError: 500"
    assert _by_name(evaluate_gates(gates, None, levels))["smoke"].status == "fail"
    off = StageGates.model_validate({"smoke": {"enabled": False}, "bench": None})
    assert [r.status for r in evaluate_gates(off, None, [])] == ["skip"]


def test_report_json_and_baseline_roundtrip() -> None:
    levels = [_level(1, 120), _level(4, 0)]
    gates = _gates(min_output_throughput=100)
    report = GateReport(
        source_stage="dev",
        target_stage="staging",
        source_endpoint="ep",
        results=evaluate_gates(gates, OK, levels),
        measurements=levels,
    )
    data = report_json(report)
    assert data["passed"] is False
    assert [r["passed"] for r in data["results"]].count(False) == 1
    again = GateReport.model_validate(data)
    assert baseline_from_measurements(again.measurements) == {1: 120}
