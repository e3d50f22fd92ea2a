"""Acceptance metrics from real vLLM /metrics text.

data/vllm_metrics_{1,2}.txt were produced by vLLM 0.30.0's own SpecDecodingProm and
prometheus_client.generate_latest (K=3; first 4 drafts accepting 3, 1, 0, 2 tokens,
then 2 more drafts accepting 3 each); the contract test regenerates such text live.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from peagle_serve import contract
from peagle_serve.metrics import (
    DraftCounters,
    MetricsReporter,
    PrometheusParseError,
    compute_window,
    draft_counters,
    parse_prometheus_text,
    render_line,
)

DATA = Path(__file__).parent / "data"
TEXT_1 = (DATA / "vllm_metrics_1.txt").read_text()
TEXT_2 = (DATA / "vllm_metrics_2.txt").read_text()
ZERO = DraftCounters(0.0, 0.0, 0.0, (0.0, 0.0, 0.0))


def test_counters_from_real_vllm_text() -> None:
    assert draft_counters(TEXT_1) == DraftCounters(4.0, 12.0, 6.0, (3.0, 2.0, 1.0))
    assert draft_counters(TEXT_2) == DraftCounters(6.0, 18.0, 12.0, (5.0, 4.0, 3.0))


def test_created_gauges_are_not_counted() -> None:
    names = {s.name for s in parse_prometheus_text(TEXT_1)}
    assert "vllm:spec_decode_num_drafts_created" in names
    c = draft_counters(TEXT_1)
    assert c is not None and c.drafts == 4.0  # not 4 + a 1.79e9 timestamp


def test_window_from_zero() -> None:
    c1 = draft_counters(TEXT_1)
    assert c1 is not None
    w = compute_window(ZERO, c1, 2.0)
    assert w is not None
    assert w.values == {
        "acceptance_rate": 0.5,
        "mean_acceptance_length": 2.5,
        "draft_tokens_per_s": 6.0,
        "accepted_tokens_per_s": 3.0,
    }
    assert w.per_position == [0.75, 0.5, 0.25]


def test_window_between_two_reads() -> None:
    c1, c2 = draft_counters(TEXT_1), draft_counters(TEXT_2)
    assert c1 is not None and c2 is not None
    w = compute_window(c1, c2, 4.0)
    assert w is not None
    assert w.values["acceptance_rate"] == 1.0
    assert w.values["mean_acceptance_length"] == 4.0
    assert w.values["draft_tokens_per_s"] == 1.5
    assert w.per_position == [1.0, 1.0, 1.0]


def test_no_window_when_nothing_changed() -> None:
    c1 = draft_counters(TEXT_1)
    assert c1 is not None
    assert compute_window(c1, c1, 60.0) is None


def test_counter_reset_uses_current_values() -> None:
    c1, c2 = draft_counters(TEXT_1), draft_counters(TEXT_2)
    assert c1 is not None and c2 is not None
    w = compute_window(c2, c1, 1.0)  # vLLM restarted: counters went down
    assert w is not None and w.values["acceptance_rate"] == 0.5


def test_engines_are_summed_and_labels_with_escapes_parse() -> None:
    text = (
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="a \\"q\\", b"} 2.0\n'
        'vllm:spec_decode_num_drafts_total{engine="1",model_name="a \\"q\\", b"} 3.0\n'
        "vllm:spec_decode_num_draft_tokens_total 15\n"
        "vllm:spec_decode_num_accepted_tokens_total 5 1700000000000\n"
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 1\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",position="1"} 1\n'
    )
    samples = parse_prometheus_text(text)
    assert samples[0].labels["model_name"] == 'a "q", b'
    assert draft_counters(text) == DraftCounters(5.0, 15.0, 5.0, (0.0, 2.0))


def test_page_without_draft_counters() -> None:
    assert draft_counters("# HELP x y\nvllm:num_requests_running 0\n") is None


@pytest.mark.parametrize("line", ["vllm:x{a=1} 2", 'vllm:x{a="1"}', "vllm:x abc"])
def test_malformed_lines_raise(line: str) -> None:
    with pytest.raises(PrometheusParseError):
        parse_prometheus_text(line)


def test_rendered_line_is_the_shared_contract_line() -> None:
    c1 = draft_counters(TEXT_1)
    assert c1 is not None
    w = compute_window(ZERO, c1, 2.0)
    assert w is not None
    line = render_line(w, 1_700_000_000_000)
    assert "\n" not in line
    doc = contract.parse_metric_line(line)
    assert doc is not None
    assert doc["acceptance_rate"] == 0.5
    assert doc["acceptance_rate_per_position"] == [0.75, 0.5, 0.25]
    assert doc["_aws"]["CloudWatchMetrics"][0]["Namespace"] == contract.METRIC_NAMESPACE


# --- the reporter --------------------------------------------------------------------


class Pages:
    """Serves the queued /metrics pages in order (the last one repeats)."""

    def __init__(self, pages: list[str]) -> None:
        self.pages = pages
        self.calls = 0

    def __call__(self, url: str) -> str:
        page = self.pages[min(self.calls, len(self.pages) - 1)]
        self.calls += 1
        if page == "down":
            raise ConnectionRefusedError(url)
        return page


def test_reporter_prints_one_line_per_change_and_nothing_otherwise() -> None:
    out = io.StringIO()
    clock = iter([0.0, 5.0, 15.0, 25.0, 35.0, 45.0])  # created at 0, then 5 reads
    pages = Pages(["down", TEXT_1, TEXT_1, TEXT_2, TEXT_2])
    reporter = MetricsReporter(
        "http://x/metrics",
        10,
        out=out,
        fetch=pages,
        monotonic=lambda: next(clock),
        wall_ms=lambda: 1,
    )
    results = [reporter.poll_once() for _ in range(5)]
    # vLLM starting, drafted since it started, unchanged, changed, unchanged
    assert [r is not None for r in results] == [False, True, False, True, False]
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    # The first window starts from zero at the last read that found no engine (t=5).
    assert first["acceptance_rate"] == 0.5
    assert first["mean_acceptance_length"] == 2.5
    assert first["draft_tokens_per_s"] == 1.2  # 12 draft tokens in 10 s
    assert first["acceptance_rate_per_position"] == [0.75, 0.5, 0.25]
    assert second["acceptance_rate"] == 1.0
    assert second["draft_tokens_per_s"] == 0.6  # 6 draft tokens since the read at t=15


def test_what_was_drafted_before_the_first_read_is_reported() -> None:
    """An endpoint that serves a few requests and then idles still logs its acceptance
    (before, the first read was only a baseline and those drafts were never reported)."""
    out = io.StringIO()
    clock = iter([100.0, 160.0, 220.0])
    reporter = MetricsReporter(
        "http://x/metrics",
        60,
        out=out,
        fetch=Pages([TEXT_1]),
        monotonic=lambda: next(clock),
        wall_ms=lambda: 1,
    )
    line = reporter.poll_once()
    assert line is not None
    doc = contract.parse_metric_line(line)
    assert doc is not None
    assert doc["acceptance_rate"] == 0.5
    assert doc["draft_tokens_per_s"] == 12 / 60  # since the reporter started
    assert reporter.poll_once() is None  # idle afterwards: nothing more


def test_a_failed_read_after_the_engine_answered_does_not_shorten_the_window() -> None:
    out = io.StringIO()
    clock = iter([0.0, 10.0, 20.0, 30.0])
    reporter = MetricsReporter(
        "http://x/metrics",
        10,
        out=out,
        fetch=Pages([TEXT_1, "down", TEXT_2]),
        monotonic=lambda: next(clock),
        wall_ms=lambda: 1,
    )
    assert reporter.poll_once() is not None
    assert reporter.poll_once() is None  # a passing error
    line = reporter.poll_once()
    assert line is not None
    doc = json.loads(line)
    assert doc["draft_tokens_per_s"] == 6 / 20  # since the last good read, at t=10


def test_reporter_lines_carry_the_endpoint_dimension() -> None:
    out = io.StringIO()
    clock = iter([0.0, 10.0])
    env = {contract.ENDPOINT_NAME_ENV: "peagle-gpt-oss-20b-prod"}
    reporter = MetricsReporter(
        "http://x/metrics",
        10,
        out=out,
        fetch=Pages([TEXT_1]),
        monotonic=lambda: next(clock),
        wall_ms=lambda: 1,
        dimensions=contract.metric_dimensions(env),
    )
    line = reporter.poll_once()
    assert line is not None
    doc = contract.parse_metric_line(line)
    assert doc is not None
    assert doc[contract.METRIC_DIMENSION] == "peagle-gpt-oss-20b-prod"
    assert doc[contract.VARIANT_DIMENSION] == contract.DEFAULT_VARIANT  # the one variant
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    assert directive["Dimensions"] == [
        [contract.METRIC_DIMENSION],  # the endpoint-wide series, as before
        [contract.METRIC_DIMENSION, contract.VARIANT_DIMENSION],
    ]
    assert contract.metric_dimensions({}) == {}  # unnamed container: no dimension


def test_a_candidates_lines_carry_its_variant() -> None:
    env = {contract.ENDPOINT_NAME_ENV: "peagle-x-prod", contract.VARIANT_NAME_ENV: "Candidate"}
    assert contract.metric_dimensions(env) == {
        contract.METRIC_DIMENSION: "peagle-x-prod",
        contract.VARIANT_DIMENSION: "Candidate",
    }


@pytest.fixture
def metrics_server() -> Iterator[tuple[str, list[str]]]:
    pages = [TEXT_1]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages[0].encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", pages
    finally:
        server.shutdown()
        server.server_close()


def test_reporter_thread_against_a_real_http_endpoint(
    metrics_server: tuple[str, list[str]],
) -> None:
    url, pages = metrics_server
    out = io.StringIO()
    reporter = MetricsReporter(url, 0.05, out=out)
    assert reporter.poll_once() is not None  # TEXT_1, counted from zero, over HTTP
    pages[0] = TEXT_2
    reporter.start()
    try:
        for _ in range(200):
            if len(out.getvalue().splitlines()) >= 2:
                break
            threading.Event().wait(0.02)
    finally:
        reporter.stop()
    assert reporter._thread is not None and not reporter._thread.is_alive()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # TEXT_2 repeats afterwards: no more lines
    assert contract.parse_metric_line(lines[1]) is not None


@pytest.mark.parametrize(
    "value",
    [
        "notaurl",
        "ftp://127.0.0.1/metrics",
        "http://",
        "http://127.0.0.1:99999/metrics",
        "http://[::1",
    ],
)
def test_a_bad_metrics_url_is_one_warning_and_the_default(value: str) -> None:
    """Issue 30: a bad PEAGLE_METRICS_URL killed the reporter thread (urlopen raised
    ValueError), so no metric line ever came again and an experiment could never decide."""
    from peagle_serve.metrics import DEFAULT_METRICS_URL, METRICS_URL_ENV, metrics_url

    url, warning = metrics_url(value)
    assert url == DEFAULT_METRICS_URL
    assert warning is not None and METRICS_URL_ENV in warning and "\n" not in warning
    assert metrics_url("http://127.0.0.1:8080/metrics") == ("http://127.0.0.1:8080/metrics", None)
    assert metrics_url(None) == (DEFAULT_METRICS_URL, None)


def test_the_reporter_thread_survives_any_unreadable_read() -> None:
    """A read that raises ValueError (a bad URL, a page that is not text) is skipped like a
    refused connection; the next good read is reported."""
    pages = iter([ValueError("unknown url type"), PrometheusParseError("x"), TEXT_1])
    out = io.StringIO()

    def fetch(_url: str) -> str:
        page = next(pages)
        if isinstance(page, Exception):
            raise page
        return page

    clock = iter([0.0, 60.0, 120.0, 180.0])
    reporter = MetricsReporter(
        "notaurl", 60, out=out, fetch=fetch, monotonic=lambda: next(clock), wall_ms=lambda: 1
    )
    assert reporter.poll_once() is None
    assert reporter.poll_once() is None
    assert reporter.poll_once() is not None
