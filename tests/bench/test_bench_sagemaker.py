"""The SageMaker target against the emulator (real event-stream framing, CloudWatch Logs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from peagle_deploy.bench import SageMakerTarget, SweepConfig, run_sweep
from peagle_deploy.bench.datasets import Dataset
from peagle_deploy.emulator import LocalAWS

TINY = Dataset("tiny", tuple([[{"role": "user", "content": f"question {i}"}] for i in range(4)]))


@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAWS]:
    with LocalAWS() as local:
        sm = local.client("sagemaker")
        sm.create_model(
            ModelName="m",
            ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
            PrimaryContainer={"Image": "x"},
        )
        sm.create_endpoint_config(
            EndpointConfigName="c",
            ProductionVariants=[
                {
                    "VariantName": "AllTraffic",
                    "ModelName": "m",
                    "InstanceType": "ml.g7e.2xlarge",
                    "InitialInstanceCount": 1,
                }
            ],
        )
        sm.create_endpoint(EndpointName="ep", EndpointConfigName="c")
        sm.create_endpoint(EndpointName="ep-spec", EndpointConfigName="c")
        with local.patched_environ():
            yield local


def _target(aws: LocalAWS, name: str = "ep") -> SageMakerTarget:
    return SageMakerTarget(
        name, region=aws.region, endpoint_url=aws.endpoint_url, logs_delay_s=0, label="sm"
    )


def _config(**kw: Any) -> SweepConfig:
    base: dict[str, Any] = {"progress": False, "warmup": 1, "max_tokens": 7}
    base.update(kw)
    return SweepConfig(**base)


def test_stream_metrics_and_acceptance_from_logs(aws: LocalAWS) -> None:
    # Awkward PayloadPart splits (the default) cut events and UTF-8 characters anywhere.
    aws.set_stream(ttft_s=0.02, token_delay_s=0.0, tokens_per_chunk=3, endpoint_name="ep-spec")
    aws.set_spec_metrics("ep-spec", acceptance_rate=0.5, num_speculative_tokens=4)
    result = run_sweep(
        _target(aws, "ep-spec"), _config(concurrency=[1, 3], num_prompts=4), dataset=TINY
    )
    assert result.target == "endpoint:ep-spec"
    for lv in result.levels:
        d = lv.to_dict()
        assert d["completed"] == 4
        assert d["failed"] == 0
        assert d["total_output_tokens"] == 4 * 7  # from the stream's usage
        assert d["median_ttft_ms"] >= 20.0
        assert d["total_input_tokens"] is not None
        # The emulated container logs one metric line per invocation (rate 0.5, K=4).
        assert d["spec_decode_acceptance_rate"] == pytest.approx(50.0)
        assert d["spec_decode_acceptance_length"] == pytest.approx(3.0)
        assert d["spec_decode_source"] == "cloudwatch-logs"
        rates = d["spec_decode_per_position_acceptance_rates"]
        assert len(rates) == 4
        assert sum(rates) / 4 == pytest.approx(0.5)


def test_no_metric_lines_means_no_acceptance(aws: LocalAWS) -> None:
    result = run_sweep(_target(aws), _config(concurrency=[1], num_prompts=2), dataset=TINY)
    assert result.levels[0].to_dict()["spec_decode_acceptance_rate"] is None
    assert result.levels[0].metrics["completed"] == 2


def test_missing_endpoint_is_a_failed_request_with_the_reason(aws: LocalAWS) -> None:
    result = run_sweep(
        _target(aws, "nope"), _config(concurrency=[1], num_prompts=2, warmup=0), dataset=TINY
    )
    d = result.levels[0].to_dict()
    assert d["completed"] == 0
    assert d["failed"] == 2
    (reason,) = d["errors"]
    assert "ValidationError" in reason
    assert "nope" in reason


def test_missing_region_or_credentials_fail_before_any_request(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from peagle_deploy.errors import PeagleError, SpecError

    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with pytest.raises(SpecError) as err:
        run_sweep(SageMakerTarget("ep"), _config(concurrency=[1], num_prompts=1), dataset=TINY)
    assert err.value.field == "--region"
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(PeagleError, match="no AWS credentials"):
        run_sweep(
            SageMakerTarget("ep", region="us-east-1"),
            _config(concurrency=[1], num_prompts=1),
            dataset=TINY,
        )


def test_cli_explains_missing_acceptance_on_stderr(
    aws: LocalAWS, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from peagle_deploy.cli.app import main

    chats = tmp_path / "chats.jsonl"
    chats.write_text('{"messages": [{"role": "user", "content": "q"}]}\n')
    base = ["bench", "-c", "1", "-n", "2", "--warmup", "0", "--max-tokens", "4",
            "--dataset", str(chats), "--logs-delay", "0", "--region", aws.region]  # fmt: skip
    assert main([*base, "--endpoint", "ep", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["levels"][0]["spec_decode_acceptance_length"] is None
    assert "no acceptance figures at concurrency 1" in err and "/aws/sagemaker/Endpoints/ep" in err
    # An endpoint that logs metric lines gets its figures and no such warning.
    aws.set_spec_metrics("ep-spec", acceptance_rate=0.5, num_speculative_tokens=4)
    assert main([*base, "--endpoint", "ep-spec", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["levels"][0]["spec_decode_acceptance_length"] is not None
    assert "no acceptance figures" not in err
