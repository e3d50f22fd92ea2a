"""Pieces of the promotion that need no endpoint: naming, diff, spec file, rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from peagle_deploy.errors import InputError
from peagle_deploy.promote.evaluate import GateReport, GateResult
from peagle_deploy.promote.gates import StageGates
from peagle_deploy.promote.measure import measurement_from_level
from peagle_deploy.promote.runner import (
    PromotionResult,
    StageState,
    _diff,
    _planned_gates,
    render_result,
    write_stage_spec,
)
from peagle_deploy.promote.target import derive_target_endpoint_name


def test_target_name_follows_the_stage_suffix() -> None:
    assert derive_target_endpoint_name("peagle-x-dev", None, "dev", "staging") is None
    assert derive_target_endpoint_name("coder-dev", "coder-dev", "dev", "staging") == (
        "coder-staging"
    )
    with pytest.raises(InputError) as info:
        derive_target_endpoint_name("coder", "coder", "dev", "staging")
    assert info.value.field == "--target-name"


class _Plan:
    model_name = "ep-m1"
    endpoint_config_name = "ep-c1"
    endpoint_name = "ep"


def test_diff_create_update_none() -> None:
    absent = StageState(stage="staging", endpoint_name="ep")
    assert _diff(absent, _Plan())[0] == "create"
    same = StageState(
        stage="staging", endpoint_name="ep", status="InService", endpoint_config_name="ep-c1"
    )
    assert _diff(same, _Plan())[0] == "none"
    other = same.model_copy(update={"endpoint_config_name": "ep-c0"})
    action, changes = _diff(other, _Plan())
    assert action == "update"
    assert "ep-c0 -> ep-c1" in changes[-1]


def test_planned_gates_match_the_thresholds() -> None:
    gates = StageGates.model_validate(
        {
            "bench": {"concurrency": [1, 8]},
            "thresholds": {"min_output_throughput": {8: 100}, "max_p99_ttft_ms": 10},
        }
    )
    assert _planned_gates(gates) == [
        "smoke",
        "error_rate@c1",
        "p99_ttft_ms@c1",
        "error_rate@c8",
        "output_throughput@c8",
        "p99_ttft_ms@c8",
    ]


def _report() -> GateReport:
    return GateReport(
        source_stage="dev",
        target_stage="staging",
        source_endpoint="ep-dev",
        results=[
            GateResult(
                name="smoke",
                kind="smoke",
                measured="5 chars",
                required="non-empty text",
                status="pass",
            )
        ],
    )


def test_write_stage_spec_writes_yaml_and_report(tmp_path: Path) -> None:
    from peagle_deploy.spec import load_spec

    spec = load_spec(None, model="qwen3-coder-30b-a3b-instruct", stage="staging")
    source = StageState(
        stage="dev",
        endpoint_name="ep-dev",
        status="InService",
        endpoint_config_name="ep-dev-c1",
        content_hash="abc123",
    )
    path = write_stage_spec(tmp_path / "stages" / "staging.yaml", spec, source, _report())
    text = path.read_text()
    assert text.startswith("# Written by `peagle promote --from dev --to staging`")
    assert "spec abc123" in text
    again = load_spec(path)
    assert again == spec
    report = json.loads((tmp_path / "stages" / "staging.yaml.gates.json").read_text())
    assert report["passed"] is True
    assert yaml.safe_load(text)["stage"] == "staging"


def test_render_result_and_json() -> None:
    result = PromotionResult(
        status="refused",
        action="update",
        source=StageState(stage="dev", endpoint_name="ep-dev", status="InService"),
        target=StageState(stage="staging", endpoint_name="ep-staging"),
        changes=["create model m"],
        report=_report(),
        message="promotion refused by 1 gate(s)",
    )
    console = Console(record=True, width=120)
    render_result(result, console)
    text = console.export_text()
    assert "promotion refused by 1 gate(s)" in text and "smoke" in text and "absent" in text
    assert "refused: promotion refused" not in text  # the status is said once (issue 31)
    data = result.to_json()
    assert data["report"]["passed"] is True and data["status"] == "refused"


def test_a_promotion_is_said_once() -> None:
    """`peagle promote` and `peagle demo` printed `promoted: promoted dev -> staging`."""
    result = PromotionResult(
        status="promoted",
        action="create",
        source=StageState(stage="dev", endpoint_name="ep-dev", status="InService"),
        target=StageState(stage="staging", endpoint_name="ep-staging"),
        message="promoted dev -> staging (cfg); recorded in /peagle/staging/ep-staging",
    )
    console = Console(record=True, width=120)
    render_result(result, console)
    lines = console.export_text().splitlines()
    assert lines[-1] == "promoted dev -> staging (cfg); recorded in /peagle/staging/ep-staging"


def test_measurement_from_bench_level_dict() -> None:
    m = measurement_from_level(
        {
            "concurrency": 4,
            "output_throughput": 812.5,
            "p99_ttft_ms": 61.0,
            "completed": 9,
            "failed": 1,
            "spec_decode_acceptance_length": 2.8,
        }
    )
    assert (m.concurrency, m.error_rate, m.spec_decode_acceptance_length) == (4, 0.1, 2.8)
    empty = measurement_from_level(
        {
            "concurrency": 1,
            "output_throughput": 0,
            "p99_ttft_ms": None,
            "completed": 0,
            "failed": 3,
            "spec_decode_acceptance_length": None,
        }
    )
    assert empty.p99_ttft_ms is None and empty.error_rate == 1.0


def test_failed_smoke_skips_the_benchmark() -> None:
    from peagle_deploy.promote.evaluate import SmokeOutcome
    from peagle_deploy.promote.runner import PromoteOptions, run_gates

    def no_bench(name: str, settings: object) -> list:
        raise AssertionError("the benchmark must not run after a failed smoke test")

    gates = StageGates.model_validate({"thresholds": {"min_output_throughput": 1}})
    report = run_gates(
        gates,
        StageState(stage="dev", endpoint_name="ep-dev", status="InService"),
        PromoteOptions(source_stage="dev", target_stage="staging"),
        clients=None,
        console=Console(quiet=True),
        smoke_runner=lambda name, gate: SmokeOutcome(text="", error="InvokeError: 500"),
        bench_runner=no_bench,
    )
    assert not report.passed
    assert [(r.name, r.status) for r in report.results] == [("smoke", "fail"), ("bench", "skip")]
    assert report.results[1].detail == "not run: the smoke gate failed"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "neither 'humaneval' nor an existing file"),
        ('{"messages": [{"role": "user", "content": "hi"}]}\nnot json\n', "line 2: not valid JSON"),
    ],
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_bad_bench_dataset_is_refused_before_any_aws_call(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    content: str | None,
    problem: str,
    dry_run: bool,
) -> None:
    from peagle_deploy.promote import runner, store

    def no_aws(region: str | None) -> None:
        raise AssertionError("the dataset must be checked before any AWS client is made")

    monkeypatch.setattr(store.Clients, "create", staticmethod(no_aws))
    dataset = tmp_path / "prompts.jsonl"
    if content is not None:
        dataset.write_text(content, encoding="utf-8")
    gates = StageGates.model_validate({"bench": {"concurrency": [1], "dataset": str(dataset)}})
    options = runner.PromoteOptions(source_stage="dev", target_stage="staging", dry_run=dry_run)
    with pytest.raises(InputError) as info:
        runner.promote(options, gates, console=Console(quiet=True))
    assert info.value.field == "gates.stages.staging.bench.dataset"
    assert problem in str(info.value)


def test_unwritable_write_spec_is_refused_before_any_aws_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from peagle_deploy.promote import runner, store

    def no_aws(region: str | None) -> None:
        raise AssertionError("--write-spec must be checked before any AWS client is made")

    monkeypatch.setattr(store.Clients, "create", staticmethod(no_aws))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    gates = StageGates.model_validate({"bench": None})
    for target in (blocker / "stages" / "staging.yaml", tmp_path):
        options = runner.PromoteOptions(
            source_stage="dev", target_stage="staging", write_spec=target
        )
        with pytest.raises(InputError) as info:
            runner.promote(options, gates, console=Console(quiet=True))
        assert info.value.field == "--write-spec"


def test_write_stage_spec_failure_is_one_line(tmp_path: Path) -> None:
    from peagle_deploy.errors import PeagleError
    from peagle_deploy.spec import load_spec

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    spec = load_spec(None, model="qwen3-coder-30b-a3b-instruct", stage="staging")
    source = StageState(stage="dev", endpoint_name="ep-dev", content_hash="abc")
    report = GateReport(
        source_stage="dev", target_stage="staging", source_endpoint="ep-dev", results=[]
    )
    with pytest.raises(PeagleError, match="could not be written") as info:
        write_stage_spec(blocker / "staging.yaml", spec, source, report)
    assert not isinstance(info.value, OSError)


def test_verdict_counts_skips_apart_from_passes() -> None:
    from peagle_deploy.promote.report import verdict

    def result(name: str, status: str) -> GateResult:
        return GateResult(name=name, kind="x", measured=None, required="-", status=status)  # type: ignore[arg-type]

    def report(*results: GateResult) -> GateReport:
        return GateReport(
            source_stage="dev", target_stage="prod", source_endpoint="e", results=list(results)
        )

    assert verdict(report(result("a", "pass"), result("b", "pass"))) == "all 2 gates passed"
    mixed = report(result("a", "pass"), result("ratio@c1", "skip"), result("ratio@c4", "skip"))
    assert verdict(mixed) == ("1 of 3 gates passed, 2 skipped (ratio@c1, ratio@c4), none failed")
    failed = report(result("a", "fail"), result("b", "skip"))
    assert verdict(failed) == "1 of 2 gates failed: a"
