"""Reading SageMaker's detailed observability: PromQL answers -> per-instance observations.

Pure: a fake QueryMetrics (`post`) answers in the Prometheus HTTP API's matrix format.
The end-to-end read over real HTTP is in tests/emulator/test_emulator_experiments.py and
tests/experiment/test_experiment_platform.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from peagle_deploy.experiment.detailed import (
    ENDPOINT_LABEL,
    HOST_LABEL,
    VARIANT_LABEL,
    PromQLError,
    read,
    read_detailed,
    selector,
)

START = datetime(2026, 11, 1, tzinfo=UTC)
T0 = START.timestamp()


def _labels(name: str, variant: str = "AllTraffic", host: str = "i-1", **extra: str) -> dict:
    return {
        "__name__": name,
        ENDPOINT_LABEL: "ep",
        VARIANT_LABEL: variant,
        HOST_LABEL: host,
        **extra,
    }


class Fake:
    """QueryMetrics over a fixed set of series; records what it was asked."""

    def __init__(self, series: list[tuple[dict[str, str], list[tuple[float, float]]]]) -> None:
        self.series = series
        self.asked: list[dict[str, str]] = []

    def __call__(self, path: str, fields: dict[str, str]) -> Any:
        assert path == "/api/v1/query_range"
        self.asked.append(fields)
        name = json.loads(fields["query"][1 : fields["query"].index(",")])
        start, end = float(fields["start"]), float(fields["end"])
        extra = "finished_reason" if "finished_reason" in fields["query"] else None
        result = [
            {"metric": labels, "values": [[t, str(v)] for t, v in samples if start <= t <= end]}
            for labels, samples in self.series
            if labels["__name__"] == name and (extra is None or labels.get(extra) == "error")
        ]
        return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def test_the_selector_quotes_utf8_names_and_labels() -> None:
    assert selector("vllm:x_total", "ep", {"finished_reason": "error"}) == (
        '{"vllm:x_total", "aws.sagemaker.endpoint.name"="ep", "finished_reason"="error"}'
    )


def test_increases_per_step_from_a_baseline_with_a_reset_and_a_new_container() -> None:
    step = 60.0
    series = [
        # the incumbent served before the experiment: its first point is the baseline
        (
            _labels("vllm:e2e_request_latency_seconds_count"),
            [(T0 - 60, 100), (T0, 110), (T0 + 60, 3)],
        ),
        (_labels("vllm:generation_tokens_total"), [(T0 - 60, 5000), (T0, 5500), (T0 + 60, 100)]),
        # the candidate's container started inside the span: it counts from zero
        (
            _labels("vllm:e2e_request_latency_seconds_count", "Candidate", "i-2"),
            [(T0, 7), (T0 + 60, 9)],
        ),
        (_labels("vllm:generation_tokens_total", "Candidate", "i-2"), [(T0, 700), (T0 + 60, 900)]),
        (
            _labels("vllm:request_success_total", "Candidate", "i-2", finished_reason="error"),
            [(T0, 1), (T0 + 60, 4)],
        ),
    ]
    reading = read_detailed(
        Fake(series), "ep", start=START, end=START + timedelta(minutes=1), step_s=step
    )
    got = {
        (o.variant, o.timestamp_ms // 1000 - int(T0)): (o.requests, o.output_tokens)
        for o in reading.samples
    }
    assert got == {
        ("AllTraffic", 0): (10, 500),
        ("AllTraffic", 60): (3, 100),  # the counter went down: a restart, 3 since
        ("Candidate", 0): (7, 700),  # a container born in the span counts from zero
        ("Candidate", 60): (2, 200),
    }
    assert reading.errors == {"Candidate": [(int(T0 * 1000), 1.0), (int((T0 + 60) * 1000), 3.0)]}
    assert reading.missing is None


def test_histograms_are_rebuilt_per_step_from_cumulative_buckets() -> None:
    name = "vllm:time_to_first_token_seconds"
    series = [
        (_labels("vllm:e2e_request_latency_seconds_count"), [(T0 - 60, 0), (T0, 4)]),
        (_labels(name + "_bucket", le="0.1"), [(T0 - 60, 0), (T0, 1)]),
        (_labels(name + "_bucket", le="0.5"), [(T0 - 60, 0), (T0, 3)]),
        (_labels(name + "_bucket", le="+Inf"), [(T0 - 60, 0), (T0, 4)]),
        (_labels(name + "_sum"), [(T0 - 60, 0), (T0, 2.0)]),
    ]
    reading = read_detailed(Fake(series), "ep", start=START, end=START, step_s=60)
    (obs,) = reading.samples
    ttft = obs.histograms["ttft_s"]
    assert ttft.bounds == (0.1, 0.5) and ttft.counts == (1, 2, 1) and ttft.total == 2.0


def test_spans_longer_than_a_day_are_read_in_pieces() -> None:
    fake = Fake([])
    read(fake, ["vllm:x"], "ep", start=START, end=START + timedelta(hours=60), step_s=60)
    spans = [(float(a["start"]), float(a["end"])) for a in fake.asked]
    assert len(spans) == 3 and all(end - start <= 24 * 3600 for start, end in spans)
    assert spans[0][0] == T0 and spans[-1][1] == T0 + 60 * 3600


def test_no_series_says_what_was_looked_for_and_a_refusal_is_one_error() -> None:
    reading = read_detailed(Fake([]), "ep", start=START, end=START, step_s=60)
    assert reading.samples == [] and reading.missing is not None
    assert "vllm:generation_tokens_total" in reading.missing

    def refused(path: str, fields: dict[str, str]) -> Any:
        return {"status": "error", "errorType": "bad_data", "error": "24-hour scan window"}

    with pytest.raises(PromQLError, match="24-hour scan window"):
        read(refused, ["vllm:x"], "ep", start=START, end=START + timedelta(minutes=1), step_s=60)


def test_a_counter_stored_without_its_total_suffix_is_found_by_the_second_name() -> None:
    fake = Fake([(_labels("vllm:generation_tokens"), [(T0 - 60, 1), (T0, 5)])])
    name, series = read(
        fake,
        ["vllm:generation_tokens_total", "vllm:generation_tokens"],
        "ep",
        start=START - timedelta(minutes=1),
        end=START,
        step_s=60,
    )
    assert name == "vllm:generation_tokens" and len(series) == 1
    assert [json.loads(a["query"][1 : a["query"].index(",")]) for a in fake.asked] == [
        "vllm:generation_tokens_total",
        "vllm:generation_tokens",
    ]


def test_engine_errors_raise_the_error_count_without_counting_a_500_twice() -> None:
    from peagle_deploy.experiment.fetch import with_engine_errors
    from peagle_deploy.experiment.observations import VariantSample

    counts = [
        VariantSample("AllTraffic", 60_000, 60.0, invocations=50, errors=4),
        VariantSample("AllTraffic", 120_000, 60.0, invocations=50, errors=0),
        VariantSample("Candidate", 60_000, 60.0, invocations=50, errors=0),
        VariantSample("Candidate", 120_000, 60.0, invocations=50, errors=0),
    ]
    engine = {
        "AllTraffic": [(50_000, 4.0)],  # non-streamed: each was a 500 as well
        "Candidate": [(30_000, 9.0), (110_000, 6.0), (130_000, 5.0)],  # streamed: no 500
    }
    got = with_engine_errors(counts, engine)
    by = {(o.variant, o.timestamp_ms): o.errors for o in got}
    assert by[("AllTraffic", 60_000)] == 4 and by[("AllTraffic", 120_000)] == 0
    assert by[("Candidate", 60_000)] == 9 and by[("Candidate", 120_000)] == 6
    # the last engine errors come after the last published minute: they wait for it
    assert sum(o.invocations for o in got) == 200


# --- which series each variant lacks (issue 34: facts that cannot be verified) ---------


def _serving(variant: str, host: str, *, label: bool = True, stored: str = "") -> list:
    """Every watched series of one serving variant; without the variant label when
    `label` is false; under other names when `stored` prefixes them."""
    from peagle_deploy.experiment.detailed import WATCHED

    out = []
    for names in WATCHED:
        labels = _labels(stored + names[0], variant, host, le="+Inf")
        if not label:
            del labels[VARIANT_LABEL]
        out.append((labels, [(T0 - 60, 0), (T0 + 60, 4), (T0 + 600, 40)]))
    return out


def _counts(*variants: str) -> list:
    from peagle_deploy.experiment.observations import VariantSample

    # SageMaker counted invocations of each in the minute ending at T0 + 60 s
    return [VariantSample(v, int((T0 + 60) * 1000), 60.0, invocations=5) for v in variants]


def _check(series: list, counts: list, minutes_after_start: float) -> dict:
    from peagle_deploy.experiment.series_check import series_check

    end = START + timedelta(minutes=minutes_after_start)
    reading = read_detailed(Fake(series), "ep", start=START, end=end, step_s=60)
    found = series_check(
        reading.seen,
        counts,
        ["AllTraffic", "Candidate"],
        now_ms=int(end.timestamp() * 1000),
    )
    return {s.variant: s for s in found}


def test_a_shadow_variant_whose_series_carry_no_variant_label_is_named_with_what_is_missing() -> (
    None
):
    """The candidate serves (SageMaker counts its invocations) but its series come back
    without `aws.sagemaker.variant.name`: once a scrape has had time to be published,
    status names every series it looked for and did not find, and says why."""
    from peagle_deploy.experiment.series_check import LOOKED_FOR, SCRAPE_GRACE_S

    series = _serving("AllTraffic", "i-1") + _serving("Candidate", "i-2", label=False)
    got = _check(series, _counts("AllTraffic", "Candidate"), 10)
    assert got["AllTraffic"].state == "found" and got["AllTraffic"].text() is None
    cand = got["Candidate"]
    assert cand.state == "traffic but no series"
    assert cand.missing == LOOKED_FOR
    assert "vllm:e2e_request_latency_seconds_count" in cand.missing
    assert "vllm:generation_tokens_total (or vllm:generation_tokens)" in cand.missing
    assert cand.instead is not None and VARIANT_LABEL in cand.instead
    text = cand.text()
    assert text is not None and "will not decide" in text and "looked for" in text
    assert cand.to_json()["looked_for"] == list(LOOKED_FOR)
    # before a scrape could have been published, the same reading is no alarm yet
    early = _check(series, _counts("AllTraffic", "Candidate"), 2)["Candidate"]
    assert early.state == "waiting for a scrape" and SCRAPE_GRACE_S > 60


def test_no_traffic_yet_is_told_apart_from_traffic_without_series() -> None:
    series = _serving("AllTraffic", "i-1")
    got = _check(series, _counts("AllTraffic"), 30)
    assert got["AllTraffic"].state == "found"
    assert got["Candidate"].state == "no traffic yet"
    text = got["Candidate"].text()
    assert text is not None and "no traffic yet" in text


def test_series_stored_under_other_names_leave_both_variants_unseen_and_say_so() -> None:
    series = _serving("AllTraffic", "i-1", stored="otel_") + _serving(
        "Candidate", "i-2", stored="otel_"
    )
    got = _check(series, _counts("AllTraffic", "Candidate"), 10)
    assert {v.state for v in got.values()} == {"traffic but no series"}
    assert all(v.instead is None for v in got.values())  # nothing else came back either


def test_series_under_another_variant_name_are_pointed_at() -> None:
    series = _serving("AllTraffic", "i-1") + _serving("ShadowVariant-1", "i-2")
    cand = _check(series, _counts("AllTraffic", "Candidate"), 10)["Candidate"]
    assert cand.state == "traffic but no series"
    assert cand.instead is not None and "ShadowVariant-1" in cand.instead
