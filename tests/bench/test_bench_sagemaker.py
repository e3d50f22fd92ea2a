"""The SageMaker target against the emulator (real event-stream framing, CloudWatch Logs)
and against canned SageMaker failures (read in boto3's words)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from peagle_local.emulator import LocalAWS
from peagle_local.emulator.eventstream import model_stream_error, payload_part

from peagle_deploy.bench import SageMakerTarget, SweepConfig, run_sweep
from peagle_deploy.bench.datasets import Dataset
from peagle_deploy.bench.progress import NoProgress
from peagle_deploy.bench.settings import sweep_config

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
    base: dict[str, Any] = {"warmup": 1, "max_tokens": 7}
    base.update(kw)
    return sweep_config(base, progress=False)


def test_stream_metrics_and_acceptance_from_logs(aws: LocalAWS) -> None:
    # Awkward PayloadPart splits (the default) cut events and UTF-8 characters anywhere.
    aws.set_stream(ttft_s=0.02, token_delay_s=0.0, tokens_per_chunk=3, endpoint_name="ep-spec")
    aws.set_acceptance_metrics("ep-spec", acceptance_rate=0.5, num_speculative_tokens=4)
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
    from peagle_deploy.errors import InputError, PeagleError

    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with pytest.raises(InputError) as err:
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
    aws.set_acceptance_metrics("ep-spec", acceptance_rate=0.5, num_speculative_tokens=4)
    assert main([*base, "--endpoint", "ep-spec", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["levels"][0]["spec_decode_acceptance_length"] is not None
    assert "no acceptance figures" not in err


# --- failures, counted per reason in boto3's words --------------------------------------
class _Canned(BaseHTTPRequestHandler):
    """SageMaker-shaped answers by endpoint name (a stand-in for the failure cases)."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        name = self.path.split("/")[2]
        if name == "throttled":
            self._json(400, "ThrottlingException", {"message": "Rate exceeded"})
        elif name == "expired":
            message = "The security token included in the request is expired"
            self._json(403, "ExpiredTokenException", {"message": message})
        elif name == "model-error":
            doc = {"Message": "Received server error (500) from primary", "OriginalStatusCode": 500}
            self._json(424, "ModelError", doc)
        else:  # a stream that starts, then breaks off
            body = payload_part(b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n')
            if name == "broken-stream":
                body += model_stream_error("Model stream broke off", "StreamBroken")
            else:  # cut-off: the connection ends inside a message
                body += payload_part(b"data: {}\n\n")[:-3]
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.amazon.eventstream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def _json(self, status: int, error_type: str, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("X-Amzn-ErrorType", error_type)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def canned() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _boto3_reason(url: str, name: str) -> str:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "sagemaker-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        config=Config(retries={"total_max_attempts": 1}),
    )
    try:
        response = client.invoke_endpoint_with_response_stream(
            EndpointName=name, Body=b"{}", ContentType="application/json"
        )
        for _ in response["Body"]:
            pass
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("throttled", "(ThrottlingException)"),
        ("expired", "(ExpiredTokenException)"),
        ("model-error", "(ModelError)"),
        ("broken-stream", "(ModelStreamError)"),
    ],
)
def test_failures_read_as_boto3_reports_them(
    canned: str, name: str, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    target = SageMakerTarget(name, region="us-east-1", endpoint_url=canned, logs_delay_s=0)
    result = run_sweep(target, _config(concurrency=[2], num_prompts=4, warmup=0), dataset=TINY)
    d = result.levels[0].to_dict()
    expected = _boto3_reason(canned, name)
    assert code in expected
    assert d["failed"] == 4
    assert d["errors"] == {expected: 4}


def test_a_stream_cut_off_inside_a_message_is_a_failure(
    canned: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from peagle_deploy.bench.sagemaker import CUT_OFF

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    target = SageMakerTarget("cut-off", region="us-east-1", endpoint_url=canned, logs_delay_s=0)
    result = run_sweep(target, _config(concurrency=[1], num_prompts=2, warmup=0), dataset=TINY)
    assert result.levels[0].to_dict()["errors"] == {CUT_OFF: 2}


# --- the --logs-delay wait ---------------------------------------------------------------
class _Recorder(NoProgress):
    def __init__(self) -> None:
        self.waits: list[float] = []

    def waiting(self, why: str, remaining_s: float) -> None:
        assert "--logs-delay" in why
        self.waits.append(remaining_s)


def test_logs_delay_is_a_countdown_and_is_skipped_when_nothing_completed(aws: LocalAWS) -> None:
    recorder = _Recorder()
    target = SageMakerTarget("ep", region=aws.region, endpoint_url=aws.endpoint_url)
    target.logs_delay_s = 1.5
    run_sweep(target, _config(concurrency=[1], num_prompts=1), dataset=TINY, progress=recorder)
    assert recorder.waits[-1] == 0.0
    counting = recorder.waits[:-1]
    assert counting and counting == sorted(counting, reverse=True)
    assert 0.5 < counting[0] <= 1.5

    # A missing endpoint: every request fails, so there is nothing to wait for.
    recorder = _Recorder()
    missing = SageMakerTarget("nope", region=aws.region, endpoint_url=aws.endpoint_url)
    missing.logs_delay_s = 30.0
    started = time.monotonic()
    result = run_sweep(
        missing, _config(concurrency=[1], num_prompts=1, warmup=0), dataset=TINY, progress=recorder
    )
    assert result.levels[0].metrics["failed"] == 1
    assert recorder.waits == []
    assert time.monotonic() - started < 15.0


def test_countdown_on_a_terminal_and_one_line_elsewhere() -> None:
    import io

    from rich.console import Console

    from peagle_deploy.bench.progress import RichProgress

    tty = io.StringIO()
    live = RichProgress(Console(file=tty, force_terminal=True, width=100))
    for remaining in (3.0, 2.0, 1.0, 0.0):
        live.waiting("for the metric lines (--logs-delay)", remaining)
    text = tty.getvalue()
    assert "waiting 3 s" in text and "waiting 1 s" in text
    piped = io.StringIO()
    plain = RichProgress(Console(file=piped, force_terminal=False, width=100))
    for remaining in (3.0, 2.0, 1.0, 0.0):
        plain.waiting("for the metric lines (--logs-delay)", remaining)
    assert piped.getvalue() == "waiting 3 s for the metric lines (--logs-delay)\n"


def test_the_proxy_comes_from_the_environment_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from peagle_deploy.bench.sagemaker import _env_proxy

    for var in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(var, raising=False)
    url = (
        "https://runtime.sagemaker.us-west-2.amazonaws.com/endpoints/ep/invocations-response-stream"
    )
    assert _env_proxy(url) is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert _env_proxy(url) == "http://proxy.internal:3128"
    monkeypatch.setenv("NO_PROXY", ".amazonaws.com")
    assert _env_proxy(url) is None
