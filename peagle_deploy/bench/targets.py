"""What the load generator talks to: an OpenAI-compatible URL or a SageMaker endpoint.

Both targets send the same streaming chat-completion request and turn the stream into
a RequestOutput with the metric definitions of `peagle_deploy.bench.metrics`
(`peagle_deploy.bench.stream`). The SageMaker target lives in `bench.sagemaker`.
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from peagle_serve.metrics import DraftCounters, PrometheusParseError, draft_counters

from peagle_deploy.bench.metrics import AcceptanceStats, RequestOutput, acceptance_delta
from peagle_deploy.bench.sagemaker import SageMakerTarget
from peagle_deploy.bench.stream import (
    ERROR_BODY_LIMIT,
    METRICS_BODY_LIMIT,
    NO_TOKENS,
    NO_USAGE,
    REQUEST_TIMEOUT_S,
    StreamAccumulator,
    chat_payload,
    read_capped,
)
from peagle_deploy.errors import InputError, PeagleError
from peagle_deploy.extras import require
from peagle_deploy.streaming import SSEDecodeError, SSEParser

__all__ = [
    "NO_TOKENS",
    "NO_USAGE",
    "OpenAITarget",
    "SageMakerTarget",
    "StreamAccumulator",
    "Target",
    "chat_payload",
    "split_base_url",
    "target_from_string",
]


@runtime_checkable
class Target(Protocol):
    """The small protocol a benchmark target implements.

    `start` is called once before the sweep with the highest concurrency it will see,
    `close` once after. `request` must not raise: failures are RequestOutputs with
    success False and an error text. `acceptance_mark` is taken right before and
    right after each level; `acceptance_stats` turns two marks into acceptance
    figures and is called after the whole sweep (so slow sources, such as CloudWatch
    Logs, are read once at the end), only for levels where a request completed.

    Optional: `clone() -> Target` (an unstarted copy with the same settings; needed
    for `--workers`), `acceptance_ready_at(end_mark) -> float` (the wall-clock time
    from which `acceptance_stats` has its data; the sweep waits for it with a
    countdown).
    """

    label: str

    @property
    def description(self) -> str: ...

    async def start(self, max_concurrency: int) -> None: ...

    async def request(
        self, messages: list[dict[str, Any]], max_tokens: int, temperature: float
    ) -> RequestOutput: ...

    async def acceptance_mark(self) -> Any: ...

    async def acceptance_stats(self, begin: Any, end: Any) -> AcceptanceStats | None: ...

    async def close(self) -> None: ...


def split_base_url(url: str, field: str = "--url") -> tuple[str, str]:
    """(server root, chat completions URL) from a base URL with or without /v1; a value
    that is not an http(s) URL with a host is refused naming `field`."""
    allowed = "http://host:port or http://host:port/v1"
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port that is not a number in range
    except ValueError:
        raise InputError(field, f"{url!r} is not a URL", allowed) from None
    if parts.scheme not in ("http", "https") or not url.startswith(("http://", "https://")):
        raise InputError(field, f"{url!r} is not an http(s) URL", allowed)
    if not parts.hostname or port == 0 or any(c.isspace() or not c.isprintable() for c in url):
        raise InputError(field, f"{url!r} is not a URL with a host", allowed)
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
    is scraped before and after each level for acceptance figures. Without a label the
    target is named after its model (`/v1/models` when `model` is not given), which
    says more in a comparison or a plot than `127.0.0.1:8000`.
    """

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        label: str | None = None,
        api_key: str | None = None,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        extra_body: dict[str, Any] | None = None,
        scrape_metrics: bool = True,
    ) -> None:
        require("aiohttp", "benchmarking a URL")
        self.root, self.api_url = split_base_url(url)
        self.url = url
        self.model = model
        self._label = label
        self.api_key = api_key
        self.request_timeout_s = request_timeout_s
        self.extra_body = dict(extra_body or {})
        self.scrape_metrics = scrape_metrics
        self._session: Any = None
        self._headers: dict[str, str] = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    @property
    def label(self) -> str:
        if self._label:
            return self._label
        if self.model:
            return self.model.rstrip("/").rsplit("/", 1)[-1]  # an HF id: its model name
        return self.root.split("://", 1)[-1]

    @label.setter
    def label(self, value: str) -> None:
        self._label = value

    @property
    def description(self) -> str:
        return self.url

    def clone(self) -> OpenAITarget:
        """An unstarted copy with the same settings (for worker processes)."""
        return OpenAITarget(
            self.url,
            model=self.model,
            label=self.label,
            api_key=self.api_key,
            request_timeout_s=self.request_timeout_s,
            extra_body=self.extra_body,
            scrape_metrics=self.scrape_metrics,
        )

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
                body, cut = await read_capped(resp)
                if resp.status == 200 and not cut:
                    doc = json.loads(body)
                    data = doc.get("data") if isinstance(doc, dict) else None
                    first = data[0] if isinstance(data, list) and data else None
                    if isinstance(first, dict) and first.get("id"):
                        return str(first["id"])
                problem = f"{url} answered HTTP {resp.status} without a model"
                if cut:
                    problem += f" (more than {ERROR_BODY_LIMIT >> 10} KiB)"
        except aiohttp.ClientConnectorError as exc:
            await self.close()
            raise PeagleError(
                f"--url: nothing listens at {self.root} ({_connect_problem(exc)}); "
                "is the server running, and is the URL right?"
            ) from None
        except TimeoutError:
            problem = f"{url} did not answer within {self.request_timeout_s:g} s"
        except (aiohttp.ClientError, ValueError) as exc:
            problem = f"{url} did not list a model ({type(exc).__name__})"
        await self.close()
        raise PeagleError(f"--model: not given and {problem}; pass --model")

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
                    body, _ = await read_capped(resp)
                    text = body.decode("utf-8", "replace")[:200].replace("\n", " ")
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

    async def acceptance_mark(self) -> DraftCounters | None:
        """vLLM's speculative-decoding counters now (None: no /metrics or no speculation)."""
        if not self.scrape_metrics or self._session is None:
            return None
        import aiohttp

        try:
            async with self._session.get(self.root + "/metrics") as resp:
                if resp.status != 200:
                    return None
                body, cut = await read_capped(resp, METRICS_BODY_LIMIT)
                return None if cut else draft_counters(body.decode())
        except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError, PrometheusParseError):
            return None

    async def acceptance_stats(self, begin: Any, end: Any) -> AcceptanceStats | None:
        return acceptance_delta(begin, end)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _connect_problem(exc: Exception) -> str:
    """`connection refused` / `name not resolved`, from aiohttp's connector error."""
    cause = getattr(exc, "os_error", None) or exc.__cause__
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    strerror = getattr(cause, "strerror", None)
    return str(strerror or cause or exc)


def target_from_string(
    address: str,
    *,
    label: str | None = None,
    model: str | None = None,
    region: str | None = None,
    **options: Any,
) -> OpenAITarget | SageMakerTarget:
    """`http(s)://...` -> OpenAITarget, `endpoint:NAME` -> SageMakerTarget."""
    address = address.strip()
    if address.startswith("endpoint:"):
        sm_options = {
            k: v
            for k, v in options.items()
            if k in {"request_timeout_s", "extra_body", "logs_delay_s", "endpoint_url"}
        }
        return SageMakerTarget(
            address[len("endpoint:") :], region=region, label=label, model=model, **sm_options
        )
    if address.startswith(("http://", "https://")):
        url_options = {
            k: v
            for k, v in options.items()
            if k in {"request_timeout_s", "extra_body", "api_key", "scrape_metrics"}
        }
        return OpenAITarget(address, model=model, label=label, **url_options)
    raise InputError(
        "--target", f"{address!r} is not a target", "http(s)://host:port/v1, endpoint:NAME"
    )
