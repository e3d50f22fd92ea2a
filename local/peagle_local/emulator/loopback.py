"""A loopback streaming server (OpenAI and SageMaker shapes), for tests and for the harness.

It speaks just enough HTTP/1.1 (keep-alive, chunked responses) on a raw asyncio
Protocol, because the benchmark drives it at concurrency 128 as fast as it can and a
framework's per-write overhead would make the server, not the client, the thing
measured. Each stream is driven by event-loop timers (`call_at`), not by a task per
request: a chunk costs one callback and one socket write.

Behaviour (all configurable through LoopbackConfig):
- the role chunk and the first token chunk go out `ttft_s` after the request arrives;
- then one chunk every `token_delay_s * tokens_per_chunk` seconds (0: as fast as the
  loop allows), each carrying `tokens_per_chunk` tokens;
- the response has min(max_tokens, output_tokens) tokens (max_tokens alone when
  output_tokens is None); `finish_reason` rides on the last token chunk, as in vLLM;
- with `stream_options.include_usage` the final chunk carries usage (prompt tokens =
  whitespace-separated words of the messages; completion tokens = tokens sent);
- `/metrics` exports vLLM's speculative-decoding counters, grown per finished request so that
  the acceptance rate is `acceptance_rate` and K is `draft_tokens` (when draft_tokens > 0);
- `fail_every` = N makes every N-th chat request an HTTP 500, `omit_usage` drops usage;
- `GET /loopback/ttft` returns (and forgets) the median TTFT the server really produced,
  for comparing a client's TTFT with the truth;
- `POST /endpoints/<name>/invocations-response-stream` answers as SageMaker's
  InvokeEndpointWithResponseStream does: the same SSE stream, each write wrapped in a
  `PayloadPart` event-stream message (`application/vnd.amazon.eventstream`). A stand-in,
  not an emulator: it only requires a SigV4 `Authorization` header (403 otherwise, as
  AWS answers a request without one) and turns an injected failure into SageMaker's
  `ModelError` (424). `peagle_local.emulator` is the faithful emulator; this one is
  fast enough to measure a client at 50k events/s.

Run standalone (prints the base URL on the first line of stdout):
    python -m peagle_local.emulator.loopback --port 0 --ttft-ms 20 --token-delay-ms 0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from peagle_local.emulator.eventstream import payload_part

CRLF = b"\r\n"
HEADER_END = b"\r\n\r\n"
MAX_HEADER_BYTES = 64 * 1024


@dataclass
class LoopbackConfig:
    ttft_s: float = 0.0
    token_delay_s: float = 0.0
    tokens_per_chunk: int = 1
    output_tokens: int | None = None
    model: str = "loopback"
    draft_tokens: int = 0
    acceptance_rate: float = 0.6
    top_logprobs: int | None = None
    """With N, every token carries OpenAI-shaped logprobs with N alternatives: streams
    that cost the client far more per event than the server (it sends prepared bytes)."""
    fail_every: int = 0
    omit_usage: bool = False
    metrics: bool = True

    def __post_init__(self) -> None:
        if self.tokens_per_chunk < 1:
            raise ValueError("tokens_per_chunk must be >= 1")
        if self.ttft_s < 0 or self.token_delay_s < 0:
            raise ValueError("delays must be >= 0")
        if not 0.0 <= self.acceptance_rate <= 1.0:
            raise ValueError("acceptance_rate must be within 0..1")


@dataclass
class _Counters:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    requests: int = 0

    def add_request(self, tokens: int, k: int, rate: float) -> None:
        """Grow the counters as a K-token drafter with this acceptance rate would.

        Each step emits 1 + accepted tokens on average, i.e. 1 + K*rate; so a response
        of n tokens took about n / (1 + K*rate) drafting steps.
        """
        if k <= 0 or tokens <= 0:
            return
        drafts = max(1, round(tokens / (1.0 + k * rate)))
        accepted = min(max(tokens - drafts, 0), drafts * k)
        self.drafts += drafts
        self.draft_tokens += drafts * k
        self.accepted += accepted


def _frame(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk (chunked transfer encoding)."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _sagemaker_frame(payload: bytes) -> bytes:
    """One HTTP chunk holding one PayloadPart event-stream message."""
    return _frame(payload_part(payload))


def _model_error(conn: _Connection, status: int, message: str) -> None:
    """What SageMaker answers when the container returns an error status (424 ModelError)."""
    conn._simple(
        424,
        {
            "Message": f"Received server error ({status}) from primary with message "
            f'"{message}". See the endpoint\'s CloudWatch Logs for more information.',
            "OriginalMessage": message,
            "OriginalStatusCode": status,
        },
        headers={
            "x-amzn-ErrorType": "ModelError:http://internal.amazon.com/coral/com.amazon.sagemaker/"
        },
    )


def _chat_request(body: bytes) -> dict[str, Any] | str:
    """The chat request, or what is wrong with it."""
    try:
        req = json.loads(body)
        if not isinstance(req, dict):
            raise TypeError("the body must be a JSON object")
        if not isinstance(req["messages"], list):
            raise TypeError("messages must be a list")
    except (ValueError, KeyError, TypeError) as exc:
        return str(exc)
    return req


def _logprobs(tokens: int, top: int | None) -> dict[str, Any] | None:
    """An OpenAI chat `logprobs` block for `tokens` tokens of " x" (None without `top`)."""
    if top is None:
        return None

    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    alternatives = [entry(f" t{i}", -1.0 - i) for i in range(top)]
    content = [{**entry(" x", -0.01), "top_logprobs": alternatives} for _ in range(tokens)]
    return {"content": content}


def _sse(doc: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"


_STREAM_HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
)
_EVENT_STREAM_HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.amazon.eventstream\r\n"
    b"X-Amzn-SageMaker-Content-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
TTFT_PATH = "/loopback/ttft"
SAGEMAKER_PREFIX = "/endpoints/"
SAGEMAKER_SUFFIX = "/invocations-response-stream"
_REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    424: "Failed Dependency",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
}


class _Stream:
    """One streaming response, advanced by loop callbacks."""

    __slots__ = (
        "chunk_bytes",
        "conn",
        "interval",
        "last_bytes",
        "loop",
        "next_at",
        "remaining_chunks",
        "tail",
    )

    def __init__(
        self,
        conn: _Connection,
        *,
        chunks: int,
        chunk_bytes: bytes,
        last_bytes: bytes,
        tail: bytes,
        interval: float,
    ) -> None:
        self.conn = conn
        self.loop = conn.loop
        self.remaining_chunks = chunks
        self.chunk_bytes = chunk_bytes
        self.last_bytes = last_bytes
        self.tail = tail
        self.interval = interval
        self.next_at = 0.0

    def step(self) -> None:
        conn = self.conn
        if conn.closed:
            return
        if self.remaining_chunks > 1:
            conn.transport.write(self.chunk_bytes)
            self.remaining_chunks -= 1
            self.schedule()
            return
        conn.transport.write(self.last_bytes + self.tail)
        self.remaining_chunks = 0
        conn.response_done()

    def schedule(self) -> None:
        if self.interval > 0:
            self.next_at += self.interval
            self.loop.call_at(self.next_at, self.conn.when_writable, self)
        else:
            self.loop.call_soon(self.conn.when_writable, self)


class _Connection(asyncio.Protocol):
    def __init__(self, server: LoopbackServer) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.buffer = bytearray()
        self.busy = False
        self.closed = False
        self.paused = False
        self._waiting: _Stream | None = None

    # --- asyncio.Protocol ---------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        stream, self._waiting = self._waiting, None
        if stream is not None:
            stream.step()

    def data_received(self, data: bytes) -> None:
        self.buffer.extend(data)
        if not self.busy:
            self._next_request()

    # --- streams ------------------------------------------------------------------
    def when_writable(self, stream: _Stream) -> None:
        if self.paused:
            self._waiting = stream
        else:
            stream.step()

    def response_done(self) -> None:
        self.busy = False
        if self.buffer:
            self._next_request()

    # --- HTTP ---------------------------------------------------------------------
    def _next_request(self) -> None:
        end = self.buffer.find(HEADER_END)
        if end < 0:
            if len(self.buffer) > MAX_HEADER_BYTES:
                self._simple(431, {"error": "headers too large"}, close=True)
            return
        head = bytes(self.buffer[:end]).decode("latin-1")
        lines = head.split("\r\n")
        try:
            method, target, _version = lines[0].split(" ", 2)
        except ValueError:
            self._simple(400, {"error": "bad request line"}, close=True)
            return
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        if len(self.buffer) < end + 4 + length:
            return  # body not complete yet
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        self.busy = True
        self.server.route(self, method, target.split("?", 1)[0], body, headers)

    def _simple(
        self,
        status: int,
        doc: Any,
        *,
        content_type: str = "application/json",
        close: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        payload = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n"
            + extra
            + ("Connection: close\r\n" if close else "")
            + "\r\n"
        ).encode()
        self.transport.write(head + payload)
        if close:
            self.transport.close()
            self.closed = True
            return
        self.response_done()


class LoopbackServer:
    """The server. `await start()` binds (port 0: any free port), `await close()` stops."""

    def __init__(self, config: LoopbackConfig | None = None) -> None:
        self.config = config or LoopbackConfig()
        self.counters = _Counters()
        self.host = "127.0.0.1"
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._seq = 0
        self._created = int(time.time())
        self.ttfts: list[float] = []
        """Seconds from each request's arrival to its first chunk, as this server wrote it."""

    def take_ttfts(self) -> dict[str, Any]:
        """The TTFTs this server actually produced since the last call (then forgotten):
        the truth a client's TTFT is compared with. asyncio's timers fire up to 1 ms late
        (epoll waits in whole milliseconds), so they are not exactly `ttft_s`."""
        samples, self.ttfts = sorted(self.ttfts), []
        if not samples:
            return {"count": 0, "median_ms": None}
        mid = len(samples) // 2
        median = samples[mid] if len(samples) % 2 else (samples[mid - 1] + samples[mid]) / 2
        return {"count": len(samples), "median_ms": round(median * 1000.0, 4)}

    @property
    def url(self) -> str:
        """Base URL (with /v1), as clients take it."""
        return f"http://{self.host}:{self.port}/v1"

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> LoopbackServer:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), host, port, backlog=1024)
        sock = self._server.sockets[0]
        self.host, self.port = sock.getsockname()[:2]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    # --- routes -------------------------------------------------------------------
    def route(
        self, conn: _Connection, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> None:
        if method == "POST" and path in ("/v1/chat/completions", "/invocations"):
            self._chat(conn, body)
        elif (
            method == "POST"
            and path.startswith(SAGEMAKER_PREFIX)
            and path.endswith(SAGEMAKER_SUFFIX)
        ):
            if not headers.get("authorization", "").startswith("AWS4-HMAC-SHA256 Credential="):
                conn._simple(
                    403,
                    {"message": "Missing Authentication Token"},
                    headers={"x-amzn-ErrorType": "MissingAuthenticationTokenException"},
                )
                return
            self._chat(conn, body, sagemaker=True)
        elif method == "GET" and path == "/v1/models":
            conn._simple(
                200,
                {"object": "list", "data": [{"id": self.config.model, "object": "model"}]},
            )
        elif method == "GET" and path == "/metrics" and self.config.metrics:
            conn._simple(200, self.metrics_text().encode(), content_type="text/plain")
        elif method == "GET" and path in ("/health", "/ping"):
            conn._simple(200, {})
        elif method == "GET" and path == TTFT_PATH:
            conn._simple(200, self.take_ttfts())
        else:
            conn._simple(404, {"error": f"no route {method} {path}"})

    def _chat(self, conn: _Connection, body: bytes, *, sagemaker: bool = False) -> None:
        arrived = conn.loop.time()
        req = _chat_request(body)
        if isinstance(req, str):
            conn._simple(400, {"error": {"message": f"bad request: {req}", "code": 400}})
            return
        cfg = self.config
        self._seq += 1
        self.counters.requests += 1
        if cfg.fail_every and self._seq % cfg.fail_every == 0:
            error = {"error": {"message": "injected failure", "code": 500}}
            if sagemaker:
                _model_error(conn, 500, json.dumps(error))
            else:
                conn._simple(500, error)
            return
        max_tokens = req.get("max_completion_tokens") or req.get("max_tokens") or 16
        n = (
            int(max_tokens)
            if cfg.output_tokens is None
            else min(int(max_tokens), cfg.output_tokens)
        )
        n = max(n, 1)
        prompt_tokens = sum(
            len(str(m.get("content", "")).split()) for m in req["messages"] if isinstance(m, dict)
        )
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n,
            "total_tokens": prompt_tokens + n,
        }
        self.counters.add_request(n, cfg.draft_tokens, cfg.acceptance_rate)
        if req.get("stream"):
            include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
            self._stream(conn, n, usage if include_usage else None, arrived, sagemaker=sagemaker)
        else:
            self._answer(conn, n, usage, sagemaker=sagemaker)

    def _answer(self, conn: _Connection, n: int, usage: dict[str, int], *, sagemaker: bool) -> None:
        """A non-streamed chat completion of `n` tokens."""
        doc = {
            "id": f"chatcmpl-{self._seq}",
            "object": "chat.completion",
            "created": self._created,
            "model": self.config.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": " x" * n},
                    "finish_reason": "length",
                }
            ],
            "usage": usage,
        }
        if sagemaker:  # the container's JSON answer, streamed in one PayloadPart
            conn.transport.write(
                _EVENT_STREAM_HEADERS + _sagemaker_frame(json.dumps(doc).encode()) + b"0\r\n\r\n"
            )
            conn.response_done()
        else:
            conn._simple(200, doc)

    def _stream(
        self,
        conn: _Connection,
        n: int,
        usage: dict[str, int] | None,
        arrived: float,
        *,
        sagemaker: bool,
    ) -> None:
        """A streamed chat completion of `n` tokens (`usage`: the final usage chunk)."""
        cfg = self.config
        # One write = one HTTP chunk; through SageMaker also one PayloadPart message.
        frame = _sagemaker_frame if sagemaker else _frame
        base = {
            "id": f"chatcmpl-{self._seq}",
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": cfg.model,
        }

        def chunk(delta: dict[str, str], tokens: int, finish_reason: str | None) -> bytes:
            choice = {
                "index": 0,
                "delta": delta,
                "logprobs": _logprobs(tokens, cfg.top_logprobs),
                "finish_reason": finish_reason,
            }
            return frame(_sse({**base, "choices": [choice]}))

        per = cfg.tokens_per_chunk
        chunks = math.ceil(n / per)
        role = chunk({"role": "assistant", "content": ""}, 0, None)
        tail = b""
        if usage is not None and not cfg.omit_usage:
            tail += frame(_sse({**base, "choices": [], "usage": usage}))
        tail += frame(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        last_tokens = n - per * (chunks - 1)
        stream = _Stream(
            conn,
            chunks=chunks,
            chunk_bytes=chunk({"content": " x" * per}, per, None),
            last_bytes=chunk({"content": " x" * last_tokens}, last_tokens, "length"),
            tail=tail,
            interval=cfg.token_delay_s * per,
        )
        conn.transport.write(_EVENT_STREAM_HEADERS if sagemaker else _STREAM_HEADERS)
        self._first_chunk_after_ttft(stream, role, arrived)

    def _first_chunk_after_ttft(self, stream: _Stream, role: bytes, arrived: float) -> None:
        """The role chunk and the first tokens `ttft_s` after the request arrived."""
        conn, loop = stream.conn, stream.loop
        first_at = loop.time() + self.config.ttft_s

        def first() -> None:
            if conn.closed:
                return
            self.ttfts.append(loop.time() - arrived)
            conn.transport.write(role)
            stream.next_at = first_at
            stream.step()

        if self.config.ttft_s > 0:
            loop.call_at(first_at, first)
        else:
            first()

    def metrics_text(self) -> str:
        """vLLM-shaped Prometheus text: counters with `_total` and `_created` samples."""
        c = self.counters
        labels = f'engine="0",model_name="{self.config.model}"'
        lines: list[str] = []
        for name, value in (
            ("vllm:spec_decode_num_drafts", c.drafts),
            ("vllm:spec_decode_num_draft_tokens", c.draft_tokens),
            ("vllm:spec_decode_num_accepted_tokens", c.accepted),
        ):
            if self.config.draft_tokens <= 0:
                break
            lines += [
                f"# HELP {name} Number of spec decoding {name.rsplit('_', 2)[-1]}.",
                f"# TYPE {name} counter",
                f"{name}_total{{{labels}}} {float(value)}",
                f"{name}_created{{{labels}}} {float(self._created)}",
            ]
        k = self.config.draft_tokens
        if k > 0:
            # Accepted tokens spread evenly over the K positions (rate = acceptance_rate).
            per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos"
            lines.append(f"# TYPE {per_pos} counter")
            lines += [
                f'{per_pos}_total{{{labels},position="{i}"}} {c.accepted / k}' for i in range(k)
            ]
        lines += [
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{labels}}} 0.0",
        ]
        return "\n".join(lines) + "\n"


@contextmanager
def serve_in_thread(config: LoopbackConfig | None = None) -> Iterator[LoopbackServer]:
    """Run a LoopbackServer on its own event loop in a daemon thread (for sync callers)."""
    server = LoopbackServer(config)
    ready = threading.Event()
    loop = asyncio.new_event_loop()
    errors: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.start())
        except BaseException as exc:
            errors.append(exc)
            ready.set()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(server.close())
        loop.close()

    thread = threading.Thread(target=run, name="peagle-loopback", daemon=True)
    thread.start()
    ready.wait()
    if errors:
        raise errors[0]
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)


def sagemaker_runtime_env(root: str) -> dict[str, str]:
    """Environment that points boto3's sagemaker-runtime client at a loopback server root.

    Throw-away credentials (the server does not check signatures) and no profile, so a
    user's real AWS configuration is never read or used.
    """
    return {
        "AWS_ACCESS_KEY_ID": "AKIDLOOPBACK",
        "AWS_SECRET_ACCESS_KEY": "loopback-secret",
        "AWS_DEFAULT_REGION": "us-west-2",
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": root,
    }


class LoopbackProcess:
    """The loopback server in a child process (its own interpreter and event loop).

    For measurements: a server in the client's process or loop would compete with the
    client for the same core and loop. `url` is its /v1 base URL, `root` the server root.
    `priority` (a negative nice value) keeps the stand-in endpoint from being starved by
    the clients being measured and by other work on a shared machine; it needs the right
    to raise priority (root), and `prioritized` says whether it was granted.
    """

    def __init__(self, *args: str, priority: int | None = None) -> None:
        import os
        import subprocess

        cmd = [sys.executable, "-m", "peagle_local.emulator.loopback", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"loopback server did not start: {self.url!r}")
        self.root = self.url.removesuffix("/v1")
        self.prioritized = False
        if priority is not None:
            try:
                os.setpriority(os.PRIO_PROCESS, self.proc.pid, priority)
                self.prioritized = True
            except PermissionError:
                pass

    def __enter__(self) -> LoopbackProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m peagle_local.emulator.loopback")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=0.0)
    p.add_argument("--token-delay-ms", type=float, default=0.0)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--output-tokens", type=int, default=None)
    p.add_argument("--model", default="loopback")
    p.add_argument("--draft-tokens", type=int, default=0)
    p.add_argument("--acceptance-rate", type=float, default=0.6)
    p.add_argument("--top-logprobs", type=int, default=None)
    return p.parse_args(argv)


def config_from_args(args: argparse.Namespace) -> LoopbackConfig:
    return LoopbackConfig(
        ttft_s=args.ttft_ms / 1000.0,
        token_delay_s=args.token_delay_ms / 1000.0,
        tokens_per_chunk=args.tokens_per_chunk,
        output_tokens=args.output_tokens,
        model=args.model,
        draft_tokens=args.draft_tokens,
        top_logprobs=args.top_logprobs,
        acceptance_rate=args.acceptance_rate,
    )


async def serve(config: LoopbackConfig, host: str, port: int) -> None:
    """Serve until cancelled; prints the base URL first so a parent process can read it."""
    server = await LoopbackServer(config).start(host, port)
    print(server.url, flush=True)
    try:
        await server.serve_forever()
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    with suppress(KeyboardInterrupt):
        asyncio.run(serve(config_from_args(args), args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
