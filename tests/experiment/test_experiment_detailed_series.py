"""`peagle experiment status` says which detailed-observability series it looked for and
did not find, per variant, within minutes (issue 34, "Facts that cannot be verified").

Whether a shadow variant's series carry `aws.sagemaker.variant.name` is stated in no page
read. The emulator publishes the candidate's series without it (`unlabelled_variants`);
an experiment on AWS's vLLM image then never sees the candidate. Before this check
`status` said nothing about it: the experiment just never decided.
"""

from __future__ import annotations

import io

import pytest
from peagle_local.emulator import LocalAWS
from rich.console import Console
from test_experiment_lifecycle import FAST, ROLE, Wall, make_spec, moto_env
from test_experiment_platform import AWS_VLLM, _role, _send

from peagle_deploy.experiment import common
from peagle_deploy.experiment.lifecycle import experiment_status, start_experiment
from peagle_deploy.experiment.plan import incumbent_spec
from peagle_deploy.experiment.report import render_status
from peagle_deploy.sdk import deploy_peagle, waiter


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> Wall:
    w = Wall()
    monkeypatch.setattr(common, "now", w.datetime)
    monkeypatch.setattr(waiter, "_sleep", lambda s: None)
    return w


def _text(status: object) -> str:
    console = Console(file=io.StringIO(), width=400, emoji=False)
    render_status(status, console)  # type: ignore[arg-type]
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def test_status_names_the_series_a_shadow_candidate_lacks_once_a_scrape_is_due(
    monkeypatch: pytest.MonkeyPatch, wall: Wall
) -> None:
    moto_env(monkeypatch)
    with LocalAWS(seed=5, wall=wall) as aws:
        for key, value in aws.env().items():
            monkeypatch.setenv(key, value)
        _role()
        spec = make_spec().model_copy(update={"image_uri": AWS_VLLM})
        name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
        aws.set_variant(name, "AllTraffic", FAST)
        aws.set_variant(name, "Candidate", FAST)
        aws.detailed.unlabelled_variants.add("Candidate")
        start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)

        quiet = experiment_status(name).to_json()["detailed_series"]
        assert {s["variant"]: s["state"] for s in quiet} == {
            "AllTraffic": "no traffic yet",
            "Candidate": "no traffic yet",
        }

        _send(name, wall, 16)  # two emulated minutes: no scrape need have been published
        early = {s["variant"]: s for s in experiment_status(name).to_json()["detailed_series"]}
        assert early["AllTraffic"]["state"] == "found"
        assert early["Candidate"]["state"] == "waiting for a scrape"

        _send(name, wall, 64)  # eight more minutes: past any publish period
        status = experiment_status(name)
        shown = {s["variant"]: s for s in status.to_json()["detailed_series"]}
        assert shown["AllTraffic"]["state"] == "found" and shown["AllTraffic"]["missing"] == []
        cand = shown["Candidate"]
        assert cand["state"] == "traffic but no series"
        assert "vllm:e2e_request_latency_seconds_count" in cand["missing"]
        assert cand["missing"] == cand["looked_for"]
        assert "aws.sagemaker.variant.name" in cand["instead"]
        assert status.analysis is not None and status.analysis.candidate.requests == 0
        text = _text(status)
        assert "detailed metrics: Candidate: traffic for more than" in text
        assert "vllm:e2e_request_latency_seconds_count" in text
        assert "AllTraffic:" not in text.split("detailed metrics:", 1)[1]


def test_the_projects_own_lines_carry_no_detailed_series(
    monkeypatch: pytest.MonkeyPatch, wall: Wall
) -> None:
    from moto import mock_aws
    from peagle_local.emulator import MotoExtensions

    moto_env(monkeypatch)
    with mock_aws(), MotoExtensions(seed=3, wall=wall) as ext:
        _role()
        spec = make_spec()
        name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
        ext.set_variant(name, "AllTraffic", FAST)
        ext.set_variant(name, "Candidate", FAST)
        start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
        _send(name, wall, 8)
        assert experiment_status(name).to_json()["detailed_series"] is None
