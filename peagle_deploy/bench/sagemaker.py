"""A SageMaker endpoint as a benchmark target: InvokeEndpointWithResponseStream on asyncio.

Each request is built and SigV4-signed as boto3 would build it (`invoke_call`), sent with
aiohttp on one connection pool sized to the concurrency, and its body decoded as it
arrives by botocore's event-stream decoder (`eventstream`); the SSE events inside the
PayloadParts are timed on arrival like the URL target's. No thread per request: at
concurrency 128 the boto3 path spent its time queueing in threads, which inflated TTFT
(benchmarks/bench_sagemaker_target.py measures both targets side by side).

Acceptance comes from the container's metric lines in CloudWatch Logs
(`/aws/sagemaker/Endpoints/<endpoint>`), read after the sweep over each level's
wall-clock window once `logs_delay_s` has passed.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from typing import TYPE_CHECKING, Any

from peagle_deploy.aws import check_environment_region, make_session
from peagle_deploy.bench.metrics import (
    AcceptanceStats,
    RequestOutput,
    acceptance_from_metric_lines,
)
from peagle_deploy.bench.stream import (
    LOGS_DELAY_S,
    REQUEST_TIMEOUT_S,
    StreamAccumulator,
    chat_payload,
    read_capped,
)
from peagle_deploy.errors import InputError
from peagle_deploy.extras import require
from peagle_deploy.streaming import SSEDecodeError, SSEParser

if TYPE_CHECKING:
    from peagle_deploy.bench.eventstream import HeaderMemo
    from peagle_deploy.bench.invoke_call import InvokeStreamCall

CUT_OFF = "the response stream ended inside an event-stream message"


def _env_proxy(url: str) -> str | None:
    """The proxy for `url` from HTTPS_PROXY/HTTP_PROXY/NO_PROXY (urllib's rules, as boto3)."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(url)
    if not parts.hostname or proxy_bypass(parts.hostname):
        return None
    return getproxies().get(parts.scheme)


class SageMakerTarget:
    """A SageMaker endpoint through InvokeEndpointWithResponseStream.

    Credentials, region and endpoint URL come from the environment exactly as for boto3
    (`region` and `endpoint_url` override them). Failures are counted per reason with
    boto3's wording (`ModelError: An error occurred (ModelError) when calling ...`,
    throttling, expired credentials, `EventStreamError` for a stream that breaks off).
    """

    def __init__(
        self,
        endpoint_name: str,
        *,
        region: str | None = None,
        label: str | None = None,
        model: str | None = None,
        target_variant: str | None = None,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        extra_body: dict[str, Any] | None = None,
        logs_delay_s: float = LOGS_DELAY_S,
        logs_client: Any = None,
        endpoint_url: str | None = None,
    ) -> None:
        if not endpoint_name:
            raise InputError("--endpoint", "is empty", "a SageMaker endpoint name")
        require("aiohttp", "benchmarking a SageMaker endpoint")
        if region is None:
            check_environment_region()  # `peagle status`'s check, before any request
        self.endpoint_name = endpoint_name
        self.region = region
        self.label = label or endpoint_name
        self.model = model
        self.target_variant = target_variant
        self.request_timeout_s = request_timeout_s
        self.extra_body = dict(extra_body or {})
        self.logs_delay_s = logs_delay_s
        self.endpoint_url = endpoint_url
        self._logs = logs_client
        self._call: InvokeStreamCall | None = None
        self._session: Any = None
        self._proxy: str | None = None
        self._url: Any = None
        self._headers: HeaderMemo | None = None

    @property
    def description(self) -> str:
        return f"endpoint:{self.endpoint_name}"

    @property
    def log_group(self) -> str:
        return f"/aws/sagemaker/Endpoints/{self.endpoint_name}"

    def clone(self) -> SageMakerTarget:
        """An unstarted copy with the same settings (for worker processes)."""
        return SageMakerTarget(
            self.endpoint_name,
            region=self.region,
            label=self.label,
            model=self.model,
            target_variant=self.target_variant,
            request_timeout_s=self.request_timeout_s,
            extra_body=self.extra_body,
            logs_delay_s=self.logs_delay_s,
            endpoint_url=self.endpoint_url,
        )

    async def start(self, max_concurrency: int) -> None:
        import aiohttp
        from yarl import URL

        from peagle_deploy.bench.eventstream import HeaderMemo
        from peagle_deploy.bench.invoke_call import InvokeStreamCall

        self._call = InvokeStreamCall.from_environment(
            self.endpoint_name,
            region=self.region,
            endpoint_url=self.endpoint_url,
            target_variant=self.target_variant,
        )
        # TLS verified against botocore's CA bundle and the proxy from the environment, as
        # boto3 does; the signed URL is sent as is. The proxy is looked up once: aiohttp's
        # trust_env does it (and a netrc lookup) in a thread for every request, which
        # added milliseconds to TTFT on a busy machine.
        self._proxy = _env_proxy(self._call.url)
        self._url = URL(self._call.url, encoded=True)
        self._headers = HeaderMemo()
        tls = ssl.create_default_context(cafile=self._call.ca_bundle)
        connector = aiohttp.TCPConnector(
            limit=max_concurrency, limit_per_host=max_concurrency, ssl=tls
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self.request_timeout_s),
            auto_decompress=False,
            requote_redirect_url=False,
        )

    async def request(
        self, messages: list[dict[str, Any]], max_tokens: int, temperature: float
    ) -> RequestOutput:
        import aiohttp
        from botocore.eventstream import ParserError
        from botocore.exceptions import BotoCoreError, EventStreamError

        from peagle_deploy.bench.eventstream import PayloadStream

        call = self._call
        assert call is not None, "start() first"
        body = json.dumps(
            chat_payload(messages, max_tokens, temperature, self.model, self.extra_body)
        ).encode()
        perf = time.perf_counter
        try:
            headers = await call.signed_headers(body)
        except BotoCoreError as exc:  # credentials that cannot be refreshed
            return StreamAccumulator(perf()).fail(f"{type(exc).__name__}: {exc}")
        acc = StreamAccumulator(perf())
        try:
            async with self._session.post(
                self._url, data=body, headers=headers, proxy=self._proxy
            ) as resp:
                if resp.status != 200:
                    body, _ = await read_capped(resp)
                    return acc.fail(call.error_reason(resp.status, resp.headers, body))
                payloads = PayloadStream(call.event_stream_shape, self._headers)
                feed = payloads.feed
                parser = SSEParser()
                sse = parser.feed
                on_event = acc.event
                readany = resp.content.readany
                while data := await readany():
                    now = perf()
                    parts = feed(data)
                    # One SSE pass per network read, as the URL target does.
                    for event in sse(parts[0] if len(parts) == 1 else b"".join(parts)):
                        on_event(event, now)
                now = perf()
                for event in parser.flush():
                    on_event(event, now)
                if payloads.leftover():
                    return acc.fail(CUT_OFF)
        except (SSEDecodeError, EventStreamError, ParserError) as exc:
            return acc.fail(
                str(exc) if isinstance(exc, SSEDecodeError) else f"{type(exc).__name__}: {exc}"
            )
        except TimeoutError:
            return acc.fail(f"timed out after {self.request_timeout_s:g} s")
        except aiohttp.ClientConnectorError:
            from botocore.exceptions import EndpointConnectionError

            unreachable = EndpointConnectionError(endpoint_url=call.url)
            return acc.fail(f"{type(unreachable).__name__}: {unreachable}")
        except aiohttp.ClientError as exc:
            return acc.fail(f"{type(exc).__name__}: {exc}")
        return acc.finish()

    async def acceptance_mark(self) -> float:
        return time.time()

    def acceptance_ready_at(self, end: Any) -> float:
        """Wall-clock time after which a level ending at mark `end` can be read."""
        return float(end) + self.logs_delay_s

    async def acceptance_stats(self, begin: Any, end: Any) -> AcceptanceStats | None:
        wait = self.acceptance_ready_at(end) - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        return await asyncio.to_thread(self._read_metric_lines, float(begin), float(end))

    def _read_metric_lines(self, begin: float, end: float) -> AcceptanceStats | None:
        from peagle_serve.contract import metric_filter_pattern, parse_metric_line

        if self._logs is None:
            # a session of its own, as the invocations' (InvokeStreamCall): boto3's default
            # session keeps the credentials it first found for the whole process
            self._logs = make_session(self.region).client("logs", endpoint_url=self.endpoint_url)
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
        return acceptance_from_metric_lines(docs)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
