"""Acceptance metrics: read vLLM's local /metrics and print one CloudWatch-ready line.

vLLM exposes its speculative-decoding counters only on /metrics, which SageMaker's
InvokeEndpoint cannot reach, so the container itself turns them into a log line
(contract.format_metric_line: JSON that CloudWatch metric filters and EMF both read).
Every N seconds it takes the counter deltas since the previous read:

  acceptance rate        = accepted tokens / draft tokens
  mean acceptance length = 1 + accepted tokens / drafts
  rate at position i     = accepted tokens at position i / drafts
  throughputs            = token deltas / elapsed seconds

(the same formulas as vLLM's SpecDecodingProm docstring). No line when nothing was
drafted since the previous read, so an idle endpoint writes nothing. The first window
starts from zero, where vLLM's counters start.

Parsing and computing are pure functions; MetricsReporter is the thin thread around them.
"""

from __future__ import annotations

import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, TextIO

from peagle_serve import contract, serving

DRAFTS: Final = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS: Final = "vllm:spec_decode_num_draft_tokens"
ACCEPTED_TOKENS: Final = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POS: Final = "vllm:spec_decode_num_accepted_tokens_per_pos"
DEFAULT_INTERVAL_S: Final = 60.0
METRICS_URL_ENV: Final = "PEAGLE_METRICS_URL"
DEFAULT_METRICS_URL: Final = f"http://127.0.0.1:{contract.SERVING_PORT}/metrics"


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


class PrometheusParseError(ValueError):
    pass


def _parse_labels(text: str, pos: int, line: str) -> tuple[dict[str, str], int]:
    """Parse `{a="x",b="y"}` starting at text[pos] == '{'; returns labels and end index."""
    labels: dict[str, str] = {}
    pos += 1
    n = len(text)
    while True:
        while pos < n and text[pos] in " ,":
            pos += 1
        if pos < n and text[pos] == "}":
            return labels, pos + 1
        eq = text.find("=", pos)
        if eq < 0 or eq + 1 >= n or text[eq + 1] != '"':
            raise PrometheusParseError(f"bad labels in line {line!r}")
        key = text[pos:eq].strip()
        pos = eq + 2
        value_chars: list[str] = []
        while pos < n and text[pos] != '"':
            if text[pos] == "\\" and pos + 1 < n:
                nxt = text[pos + 1]
                value_chars.append("\n" if nxt == "n" else nxt)
                pos += 2
            else:
                value_chars.append(text[pos])
                pos += 1
        if pos >= n:
            raise PrometheusParseError(f"unterminated label value in line {line!r}")
        labels[key] = "".join(value_chars)
        pos += 1


def parse_prometheus_text(text: str) -> list[Sample]:
    """Samples of a Prometheus text exposition (comments and blank lines skipped)."""
    samples: list[Sample] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        brace = line.find("{")
        space = line.find(" ")
        if brace >= 0 and (space < 0 or brace < space):
            name = line[:brace]
            labels, end = _parse_labels(line, brace, raw)
            rest = line[end:].split()
        else:
            parts = line.split()
            name, labels, rest = parts[0], {}, parts[1:]
        if not rest:
            raise PrometheusParseError(f"no value in line {raw!r}")
        try:
            value = float(rest[0])
        except ValueError as e:
            raise PrometheusParseError(f"bad value in line {raw!r}") from e
        samples.append(Sample(name, labels, value))
    return samples


@dataclass(frozen=True)
class DraftCounters:
    """Cumulative speculative-decoding counters, summed over engines (label sets)."""

    drafts: float
    draft_tokens: float
    accepted_tokens: float
    accepted_per_position: tuple[float, ...]  # index 0 = first draft position


def _base_name(name: str) -> str:
    return name[: -len("_total")] if name.endswith("_total") else name


def draft_counters(text: str) -> DraftCounters | None:
    """The speculative-decoding counters in a /metrics page, or None when vLLM has none
    (speculative decoding off)."""
    totals = {DRAFTS: 0.0, DRAFT_TOKENS: 0.0, ACCEPTED_TOKENS: 0.0}
    seen = False
    per_pos: dict[int, float] = {}
    for s in parse_prometheus_text(text):
        if s.name.endswith("_created"):
            continue
        base = _base_name(s.name)
        if base in totals:
            totals[base] += s.value
            seen = True
        elif base == ACCEPTED_PER_POS:
            try:
                pos = int(s.labels.get("position", ""))
            except ValueError:
                continue
            per_pos[pos] = per_pos.get(pos, 0.0) + s.value
    if not seen:
        return None
    width = max(per_pos) + 1 if per_pos else 0
    return DraftCounters(
        totals[DRAFTS],
        totals[DRAFT_TOKENS],
        totals[ACCEPTED_TOKENS],
        tuple(per_pos.get(i, 0.0) for i in range(width)),
    )


# What vLLM's counters read when its engine starts (before anything was drafted/served).
ENGINE_START: Final = DraftCounters(0.0, 0.0, 0.0, ())
SERVING_START: Final = serving.ServingCounters(0.0, 0.0, 0.0, 0.0, {})


@dataclass(frozen=True)
class AcceptanceWindow:
    """Acceptance over one interval; `values` holds every contract.METRIC_FIELDS key."""

    values: dict[str, float]
    per_position: list[float]
    drafts: float


def compute_window(
    previous: DraftCounters, current: DraftCounters, elapsed_s: float
) -> AcceptanceWindow | None:
    """Acceptance between two reads, or None when nothing was drafted in between.

    A counter that went down means vLLM restarted: the current values are the delta.
    """
    reset = current.drafts < previous.drafts or current.draft_tokens < previous.draft_tokens
    base = ENGINE_START if reset else previous
    d_drafts = current.drafts - base.drafts
    d_draft_tokens = current.draft_tokens - base.draft_tokens
    d_accepted = current.accepted_tokens - base.accepted_tokens
    if d_drafts <= 0 and d_draft_tokens <= 0:
        return None
    elapsed = elapsed_s if elapsed_s > 0 else 1.0
    per_position = [
        (cur - (base.accepted_per_position[i] if i < len(base.accepted_per_position) else 0.0))
        / d_drafts
        if d_drafts > 0
        else 0.0
        for i, cur in enumerate(current.accepted_per_position)
    ]
    values = {
        "acceptance_rate": d_accepted / d_draft_tokens if d_draft_tokens > 0 else 0.0,
        "mean_acceptance_length": 1.0 + d_accepted / d_drafts if d_drafts > 0 else 1.0,
        "draft_tokens_per_s": d_draft_tokens / elapsed,
        "accepted_tokens_per_s": d_accepted / elapsed,
    }
    return AcceptanceWindow(values, per_position, d_drafts)


def render_line(
    window: AcceptanceWindow,
    timestamp_ms: int,
    dimensions: Mapping[str, str] | None = None,
    served: Mapping[str, object] | None = None,
) -> str:
    return contract.format_metric_line(
        window.values,
        per_position_acceptance=window.per_position,
        timestamp_ms=timestamp_ms,
        dimensions=dimensions,
        serving=served,
    )


def metrics_url(value: str | None) -> tuple[str, str | None]:
    """The /metrics URL to read from PEAGLE_METRICS_URL's value, and a warning when the
    value is no http(s) URL with a host (the reporter then reads the default: a bad value
    must not stop the metric lines, without which an experiment can never decide)."""
    from urllib.parse import urlsplit

    if not value:
        return DEFAULT_METRICS_URL, None
    try:
        parts = urlsplit(value)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError:
        ok = False
    if ok:
        return value, None
    return DEFAULT_METRICS_URL, (
        f"{METRICS_URL_ENV}={value!r} is not an http(s) URL with a host; reading "
        f"{DEFAULT_METRICS_URL} instead"
    )


def fetch_metrics(url: str, timeout_s: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        body: bytes = resp.read()
    return body.decode("utf-8", errors="replace")


class MetricsReporter:
    """Background thread: every `interval_s`, read /metrics and print one line on change.

    The first window starts from zero: vLLM's counters start at zero with the engine,
    which starts together with this reporter, so what was drafted before the first read
    is reported too (an endpoint that serves a few requests and then idles still logs its
    acceptance). That window begins at the last read that found no engine answering (no
    request can have been served before it), or when the reporter started.

    Errors while vLLM is still starting (connection refused) are expected and skipped, as
    are unreadable pages and URLs: the thread keeps reading until it is stopped.
    """

    def __init__(
        self,
        url: str = DEFAULT_METRICS_URL,
        interval_s: float = DEFAULT_INTERVAL_S,
        *,
        out: TextIO | None = None,
        fetch: Callable[[str], str] = fetch_metrics,
        monotonic: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        dimensions: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        self.dimensions = dict(dimensions or {})
        self.interval_s = interval_s
        self.out = out
        self._fetch = fetch
        self._monotonic = monotonic
        self._wall_ms = wall_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous = ENGINE_START
        self._previous_at = monotonic()
        self._engine_seen = False
        self._previous_served: serving.ServingCounters | None = SERVING_START

    def poll_once(self) -> str | None:
        """One read; returns the line printed, if any."""
        try:
            text = self._fetch(self.url)
            current = draft_counters(text)
            served_now = serving.serving_counters(parse_prometheus_text(text))
        except (OSError, ValueError):  # not answering yet, a bad page, a bad URL
            current = None
        now = self._monotonic()
        if current is None:
            if not self._engine_seen:
                self._previous_at = now  # nothing was served before this read
            return None
        self._engine_seen = True
        previous, previous_at = self._previous, self._previous_at
        self._previous, self._previous_at = current, now
        served_before, self._previous_served = self._previous_served, served_now
        window = compute_window(previous, current, now - previous_at)
        if window is None:
            return None
        served = (
            serving.serving_window(served_before, served_now, now - previous_at)
            if served_before is not None and served_now is not None
            else None
        )
        line = render_line(window, self._wall_ms(), self.dimensions, served)
        out = self.out or sys.stdout
        out.write(line + "\n")
        out.flush()
        return line

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll_once()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="peagle-metrics", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
