"""What the load generator talks to: an OpenAI-compatible URL or a SageMaker endpoint.

Both targets send the same streaming chat-completion request and turn the stream into
a RequestOutput with the metric definitions of `peagle_deploy.bench.metrics`. Both ask
for `stream_options.include_usage` and take the output token count from the server's
usage, never from counting chunks.
"""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

from peagle_serve.metrics import PrometheusParseError, SpecDecodeCounters, spec_decode_counters

from peagle_deploy.bench.metrics import (
    RequestOutput,
    SpecDecodeStats,
    spec_decode_delta,
    spec_decode_from_metric_lines,
)
from peagle_deploy.errors import PeagleError, SpecError
from peagle_deploy.streaming import SSEDecodeError, SSEParser, parse_chat_chunk

_loads = json.loads
NO_USAGE = "no usage in stream (the server must honour stream_options.include_usage)"
NO_TOKENS = "stream ended without any choices event"


@runtime_checkable
class Target(Protocol):
    """The small protocol a benchmark target implements.

    `start` is called once before the sweep with the highest concurrency it will see,
    `close` once after. `request` must not raise: failures are RequestOutputs with
    success False and an error text. `spec_decode_mark` is taken right before and
    right after each level; `spec_decode_stats` turns two marks into acceptance
    figures and is called after the whole sweep (so slow sources, such as CloudWatch
    Logs, are read once at the end).
    """

    label: str

    @property
    def description(self) -> str: ...

    async def start(self, max_concurrency: int) -> None: ...

    async def request(
        self, messages: list[dict[str, Any]], max_tokens: int, temperature: float
    ) -> RequestOutput: ...

    async def spec_decode_mark(self) -> Any: ...

    async def spec_decode_stats(self, begin: Any, end: Any) -> SpecDecodeStats | None: ...

    async def close(self) -> None: ...


class StreamAccumulator:
    """Turns timed SSE payloads of one request into a RequestOutput (vLLM's rules)."""

    __slots__ = ("_last", "_out", "_started", "_usage")

    def __init__(self, start_time: float) -> None:
        self._out = RequestOutput(start_time=start_time)
        self._last = start_time
        self._started = False
        self._usage: dict[str, Any] | None = None

    def event(self, data: str, arrival: float) -> None:
        """One `data:` payload that arrived at `arrival` (perf_counter seconds).

        Only two facts matter here: does the event carry choices, and usage. The
        ordinary event is read with one json.loads; anything unusual (not an object,
        an error event) goes through `parse_chat_chunk`, which raises the shared
        SSEDecodeError. This keeps the per-event cost at about vLLM's, which matters
        at 100k events/s (benchmarks/bench_harness.py).
        """
        try:
            doc = _loads(data)
        except ValueError:
            doc = None
        if type(doc) is not dict or ("error" in doc and "choices" not in doc):
            doc = parse_chat_chunk(data).raw  # raises SSEDecodeError with the details
        if doc.get("choices"):
            out = self._out
            if not self._started:
                self._started = True
                out.ttft = arrival - out.start_time
            else:
                out.itl.append(arrival - self._last)
            self._last = arrival
        usage = doc.get("usage")
        if usage and isinstance(usage, dict):
            self._usage = usage

    def fail(self, error: str) -> RequestOutput:
        self._out.success = False
        self._out.error = error
        self._out.latency = self._last - self._out.start_time
        return self._out

    def finish(self) -> RequestOutput:
        out = self._out
        out.latency = self._last - out.start_time
        if not self._started:
            return self.fail(NO_TOKENS)
        usage = self._usage
        tokens = usage.get("completion_tokens") if usage else None
        if not isinstance(tokens, int):
            return self.fail(NO_USAGE)
        out.output_tokens = tokens
        prompt = usage.get("prompt_tokens") if usage else None
        out.prompt_tokens = prompt if isinstance(prompt, int) else None
        out.success = True
        return out


def chat_payload(
    messages: list[dict[str, Any]],
    max_tokens: int,
    temperature: float,
    model: str | None,
    extra_body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The streaming chat-completion request both targets send."""
    payload: dict[str, Any] = {}
    if model:
        payload["model"] = model
    payload.update(
        {
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    if extra_body:
        payload.update(extra_body)
    return payload


def split_base_url(url: str) -> tuple[str, str]:
    """(server root, chat completions URL) from a base URL with or without /v1."""
    if not url.startswith(("http://", "https://")):
        raise SpecError(
            "--url", f"{url!r} is not an http(s) URL", "http://host:port or http://host:port/v1"
        )
    base = url.rstrip("/")
    if base.endswith("/chat/completions"):
        root = base[: -len("/chat/completions")]
        return root.removesuffix("/v1"), base
    if base.endswith("/v1"):
        return base[:-3], base + "/chat/completions"
    return base, base + "/v1/chat/completions"


class OpenAITarget:
    """Any OpenAI-compatible server: streaming /v1/chat/completions through aiohttp.

    One ClientSession whose connection pool is at least the concurrency, so workers
    never queue for a socket. `/metrics` (vLLM's Prometheus page at the server root)
    is scraped before and after each level for acceptance figures.
    """

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        label: str | None = None,
        api_key: str | None = None,
        request_timeout_s: float = 600.0,
        extra_body: dict[str, Any] | None = None,
        scrape_metrics: bool = True,
    ) -> None:
        self.root, self.api_url = split_base_url(url)
        self.url = url
        self.model = model
        self.label = label or self.root.split("://", 1)[-1]
        self.api_key = api_key
        self.request_timeout_s = request_timeout_s
        self.extra_body = dict(extra_body or {})
        self.scrape_metrics = scrape_metrics
        self._session: Any = None
        self._headers: dict[str, str] = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    @property
    def description(self) -> str:
        return self.url

    async def start(self, max_concurrency: int) -> None:
        import aiohttp

        # +2: the /metrics scrapes never wait behind benchmark streams.
        connector = aiohttp.TCPConnector(
            limit=max_concurrency + 2, limit_per_host=max_concurrency + 2, force_close=False
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self.request_timeout_s),
            headers=self._headers,
        )
        if not self.model:
            self.model = await self._first_model()

    async def _first_model(self) -> str:
        import aiohttp

        url = self.root + "/v1/models"
        try:
            async with self._session.get(url) as resp:
                if resp.status == 200:
                    doc = await resp.json(content_type=None)
                    data = doc.get("data") if isinstance(doc, dict) else None
                    if data and isinstance(data[0], dict) and data[0].get("id"):
                        return str(data[0]["id"])
        except (TimeoutError, aiohttp.ClientError, ValueError):
            pass
        raise PeagleError(f"--model: not given and {url} did not list a model; pass --model")

    async def request(
        self, messages: list[dict[str, Any]], max_tokens: int, temperature: float
    ) -> RequestOutput:
        import aiohttp

        body = json.dumps(
            chat_payload(messages, max_tokens, temperature, self.model, self.extra_body)
        ).encode()
        perf = time.perf_counter
        acc = StreamAccumulator(perf())
        try:
            async with self._session.post(self.api_url, data=body) as resp:
                if resp.status != 200:
                    text = (await resp.text())[:200].replace("\n", " ")
                    return acc.fail(f"HTTP {resp.status}: {text}")
                parser = SSEParser()
                feed = parser.feed
                on_event = acc.event
                readany = resp.content.readany
                while data := await readany():
                    now = perf()
                    for event in feed(data):
                        on_event(event, now)
                now = perf()
                for event in parser.flush():
                    on_event(event, now)
        except SSEDecodeError as exc:
            return acc.fail(str(exc))
        except TimeoutError:
            return acc.fail(f"timed out after {self.request_timeout_s:g} s")
        except aiohttp.ClientError as exc:
            return acc.fail(f"{type(exc).__name__}: {exc}")
        return acc.finish()

    async def spec_decode_mark(self) -> SpecDecodeCounters | None:
        """vLLM's spec-decode counters now (None: no /metrics or no speculation)."""
        if not self.scrape_metrics or self._session is None:
            return None
        import aiohttp

        try:
            async with self._session.get(self.root + "/metrics") as resp:
                if resp.status != 200:
                    return None
                return spec_decode_counters(await resp.text())
        except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError, PrometheusParseError):
            return None

    async def spec_decode_stats(self, begin: Any, end: Any) -> SpecDecodeStats | None:
        return spec_decode_delta(begin, end)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class SageMakerTarget:
    """A SageMaker endpoint through InvokeEndpointWithResponseStream (boto3).

    botocore is synchronous, so each request runs (call and stream iteration) in a
    thread of an executor sized to the concurrency; each PayloadPart is timestamped
    in that thread the moment it arrives. Acceptance comes from the container's metric
    lines in CloudWatch Logs (`/aws/sagemaker/Endpoints/<endpoint>`), read after the
    sweep over each level's wall-clock window once `logs_delay_s` has passed.
    """

    def __init__(
        self,
        endpoint_name: str,
        *,
        region: str | None = None,
        label: str | None = None,
        model: str | None = None,
        target_variant: str | None = None,
        request_timeout_s: float = 600.0,
        extra_body: dict[str, Any] | None = None,
        logs_delay_s: float = 20.0,
        runtime_client: Any = None,
        logs_client: Any = None,
        endpoint_url: str | None = None,
    ) -> None:
        if not endpoint_name:
            raise SpecError("--endpoint", "is empty", "a SageMaker endpoint name")
        self.endpoint_name = endpoint_name
        self.region = region
        self.label = label or endpoint_name
        self.model = model
        self.target_variant = target_variant
        self.request_timeout_s = request_timeout_s
        self.extra_body = dict(extra_body or {})
        self.logs_delay_s = logs_delay_s
        self.endpoint_url = endpoint_url
        self._runtime = runtime_client
        self._logs = logs_client
        self._executor: ThreadPoolExecutor | None = None

    @property
    def description(self) -> str:
        return f"endpoint:{self.endpoint_name}"

    @property
    def log_group(self) -> str:
        return f"/aws/sagemaker/Endpoints/{self.endpoint_name}"

    async def start(self, max_concurrency: int) -> None:
        self._executor = ThreadPoolExecutor(
            max_workers=max_concurrency, thread_name_prefix="peagle-bench"
        )
        if self._runtime is None:
            import boto3
            from botocore.config import Config

            config = Config(
                max_pool_connections=max(10, max_concurrency + 2),
                read_timeout=self.request_timeout_s,
                retries={"max_attempts": 1, "mode": "standard"},
            )
            from botocore.exceptions import NoRegionError

            session = boto3.Session(region_name=self.region)
            if session.get_credentials() is None:
                raise PeagleError(
                    "no AWS credentials found for the SageMaker target "
                    "(set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
                )
            try:
                self._runtime = session.client(
                    "sagemaker-runtime", config=config, endpoint_url=self.endpoint_url
                )
            except NoRegionError:
                raise SpecError(
                    "--region", "no AWS region configured", "an AWS region, e.g. us-west-2"
                ) from None

    async def request(
        self, messages: list[dict[str, Any]], max_tokens: int, temperature: float
    ) -> RequestOutput:
        body = json.dumps(
            chat_payload(messages, max_tokens, temperature, self.model, self.extra_body)
        ).encode()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._invoke, body)

    def _invoke(self, body: bytes) -> RequestOutput:
        perf = time.perf_counter
        acc = StreamAccumulator(perf())
        kwargs: dict[str, Any] = {
            "EndpointName": self.endpoint_name,
            "Body": body,
            "ContentType": "application/json",
        }
        if self.target_variant:
            kwargs["TargetVariant"] = self.target_variant
        try:
            response = self._runtime.invoke_endpoint_with_response_stream(**kwargs)
            parser = SSEParser()
            for event in response["Body"]:
                now = perf()
                part = event.get("PayloadPart")
                if part is None:
                    problem = event.get("ModelStreamError") or event.get("InternalStreamFailure")
                    if problem is not None:
                        return acc.fail(f"stream error: {problem.get('Message') or problem}")
                    continue
                for data in parser.feed(part.get("Bytes", b"")):
                    acc.event(data, now)
            now = perf()
            for data in parser.flush():
                acc.event(data, now)
        except SSEDecodeError as exc:
            return acc.fail(str(exc))
        except Exception as exc:  # botocore's ClientError, EventStreamError, timeouts
            return acc.fail(f"{type(exc).__name__}: {exc}")
        return acc.finish()

    async def spec_decode_mark(self) -> float:
        return time.time()

    async def spec_decode_stats(self, begin: Any, end: Any) -> SpecDecodeStats | None:
        wait = float(end) + self.logs_delay_s - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        return await asyncio.to_thread(self._read_metric_lines, float(begin), float(end))

    def _read_metric_lines(self, begin: float, end: float) -> SpecDecodeStats | None:
        from peagle_serve.contract import metric_filter_pattern, parse_metric_line

        if self._logs is None:
            import boto3

            self._logs = boto3.client(
                "logs", region_name=self.region, endpoint_url=self.endpoint_url
            )
        docs: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "logGroupName": self.log_group,
            "startTime": int(begin * 1000),
            "endTime": int(end * 1000) + 1,
            "filterPattern": metric_filter_pattern(),
        }
        try:
            while True:
                page = self._logs.filter_log_events(**kwargs)
                for event in page.get("events", []):
                    doc = parse_metric_line(event.get("message", ""))
                    if doc is not None:
                        docs.append(doc)
                token = page.get("nextToken")
                if not token:
                    break
                kwargs["nextToken"] = token
        except Exception:  # no log group yet, no permission: acceptance is optional
            return None
        return spec_decode_from_metric_lines(docs)

    async def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def target_from_string(
    spec: str,
    *,
    label: str | None = None,
    model: str | None = None,
    region: str | None = None,
    **options: Any,
) -> OpenAITarget | SageMakerTarget:
    """`http(s)://...` -> OpenAITarget, `endpoint:NAME` -> SageMakerTarget."""
    spec = spec.strip()
    if spec.startswith("endpoint:"):
        sm_options = {
            k: v
            for k, v in options.items()
            if k in {"request_timeout_s", "extra_body", "logs_delay_s", "endpoint_url"}
        }
        return SageMakerTarget(
            spec[len("endpoint:") :], region=region, label=label, model=model, **sm_options
        )
    if spec.startswith(("http://", "https://")):
        url_options = {
            k: v
            for k, v in options.items()
            if k in {"request_timeout_s", "extra_body", "api_key", "scrape_metrics"}
        }
        return OpenAITarget(spec, model=model, label=label, **url_options)
    raise SpecError(
        "--target", f"{spec!r} is not a target", "http(s)://host:port/v1, endpoint:NAME"
    )
