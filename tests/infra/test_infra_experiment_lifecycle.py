"""A stage's experiment through CloudFormation's semantics: the CDK stack's templates,
played by the CloudFormation stand-in (cfn_harness.py) against the emulator.

The stage maps are the ones docs/experiments.md ("With CDK") gives, read from it: start,
stop in place, end without promotion, end with promotion. Each case ends with no
candidate fleet (no shadow variant, no candidate model) and the right config serving;
a promotion's endpoint update runs only once the experiment has stopped. A change of a
running experiment, and a removal without the stop, are refused by `peagle doctor
--stage`'s check in one line (and the stand-in shows what CloudFormation would do
otherwise). An autoscaled stage keeps its (pinned) capacity and its scaling is
suspended while the experiment runs, lifted after the stop. A split experiment, which is
the endpoint's config and no resource of its own, starts, changes and ends by ordinary
endpoint updates.

Run: `.venv/bin/pytest -q -n 0 tests/infra/test_infra_experiment_lifecycle.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from cdk_helpers import ROOT, cdk_context, environ
from cfn_harness import EndpointPlayer, HarnessStack, stage_players
from model_provider_kit import template_handler
from peagle_local.emulator import LocalAWS

from infra.stages import StageConfig, stage_configs
from peagle_deploy.doctor.stage_experiment import (
    Declared,
    Experiment,
    check_stage_experiment,
    live_experiment,
)
from peagle_deploy.experiment.plan import candidate_spec, experiment_plan, incumbent_spec
from peagle_deploy.spec.models import DeploymentSpec

pytestmark = pytest.mark.xdist_group(name="cdk")

DOC = ROOT / "docs" / "experiments.md"
MARKER = "<!-- run-by: tests/infra/test_infra_experiment_lifecycle.py -->"
STACK = "PeagleEndpoint-dev"
ENDPOINT = "peagle-gpt-oss-20b-dev"
DOC_STEPS = ("start", "stop")


def doc_stage_maps() -> list[dict[str, Any]]:
    """The `peagle:stages` values of the JSON blocks marked for this test, in order."""
    text = DOC.read_text(encoding="utf-8")
    pattern = re.escape(MARKER) + r"\s*```json\n(.*?)\n\s*```"
    return [json.loads(block) for block in re.findall(pattern, text, flags=re.DOTALL)]


def _stage(value: dict[str, Any]) -> StageConfig:
    (stage,) = stage_configs(value, ROOT)
    return stage


def _edited(spec: DeploymentSpec, path: Path) -> Path:
    """A spec file with the content of `spec` (step 3's edit of the stage's file)."""
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True)))
    return path


def _stages(files: Path) -> dict[str, StageConfig]:
    """Every stage the tests deploy: the document's two maps, step 3's two edits (the
    `experiment:` block removed; and the candidate's settings put in `speculative:`,
    `candidate_spec`, what the SDK's promotion deploys), and the variations."""
    maps = doc_stage_maps()
    assert len(maps) == len(DOC_STEPS), "docs/experiments.md's lifecycle blocks changed"
    stages = {step: _stage(value) for step, value in zip(DOC_STEPS, maps, strict=True)}
    start = stages["start"]
    spec = start.load_spec()
    for step, edited in (("end", incumbent_spec(spec)), ("promote", candidate_spec(spec))):
        stages[step] = replace(start, spec_file=_edited(edited, files / f"{step}.yaml"))
    stages["changed"] = replace(
        start, overrides={**start.overrides, "experiment.candidate.num_speculative_tokens": 7}
    )
    split = {"experiment.mode": "split", "experiment.weight_percent": 50}
    stages["split-start"] = replace(start, overrides={**start.overrides, **split})
    stages["split-changed"] = replace(
        stages["changed"], overrides={**stages["changed"].overrides, **split}
    )
    pinned = {"initial_instance_count": 2, "scaling": {"min_instances": 2, "max_instances": 2}}
    for step in ("start", "stop", "end"):
        stage = stages[step]
        stages[f"scaled-{step}"] = replace(stage, overrides={**stage.overrides, **pinned})
    return stages


@dataclass
class Synth:
    templates: dict[str, dict[str, Any]]
    outdir: Path
    stages: dict[str, StageConfig]

    def handler(self) -> Any:
        """The model custom resource's handler from the synthesized asset."""
        return template_handler(self.templates["start"], self.outdir)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Every stage's template, from one CDK app (one stack per stage variation)."""
    import aws_cdk as cdk

    from infra.stack import PeagleStack

    outdir = tmp_path_factory.mktemp("lifecycle")
    stages = _stages(tmp_path_factory.mktemp("specs"))
    with environ(CDK_DEFAULT_ACCOUNT=None):
        app = cdk.App(outdir=str(outdir), context=cdk_context())
        for key, stage in stages.items():
            PeagleStack(app, key, stage=stage)
        app.synth()
    templates = {k: json.loads((outdir / f"{k}.template.json").read_text()) for k in stages}
    return Synth(templates, outdir, stages)


@dataclass
class WatchedEndpoint(EndpointPlayer):
    """The endpoint's player, noting which experiment was live at each update."""

    live_at_update: list[Experiment | None] = field(default_factory=list)

    def update(self, res: Any, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        self.live_at_update.append(live_experiment(self.sm, res.physical_id))
        return super().update(res, props)


@dataclass
class Account:
    """The emulator, one stack on it, and what the tests read."""

    aws: LocalAWS
    stack: HarnessStack
    endpoint: WatchedEndpoint
    synth: Synth

    def deploy(self, step: str) -> list[tuple[str, str]]:
        """Play the stage's template; the (action, short type) of what it did, in order."""
        done = len(self.stack.events)
        self.stack.deploy(self.synth.templates[step])
        return [(e.action, e.type.rsplit("::", 1)[1]) for e in self.stack.events[done:]]

    def preflight(self, step: str) -> Any:
        """`peagle doctor --stage`'s experiment line for the stage of `step`."""
        stage = self.synth.stages[step]
        spec = stage.load_spec()
        name = experiment_plan(spec).experiment_name if spec.experiment else None
        declared = Declared(name, stage.experiment_state, f"peagle:stages.{stage.name}")
        with self.aws.patched_environ():  # the doctor's clients, on the emulator
            return check_stage_experiment(self.aws.session(), "us-east-1", ENDPOINT, declared)

    @property
    def sm(self) -> Any:
        return self.aws.client("sagemaker")

    def serving(self) -> tuple[str, list[str], list[str]]:
        """(config, production variants, shadow variants) of the endpoint now."""
        d = self.sm.describe_endpoint(EndpointName=ENDPOINT)
        production = [v["VariantName"] for v in d["ProductionVariants"]]
        shadows = [v["VariantName"] for v in d.get("ShadowProductionVariants") or []]
        return d["EndpointConfigName"], production, shadows

    def models(self) -> set[str]:
        return {m["ModelName"] for m in self.sm.list_models()["Models"]}

    def experiments(self) -> dict[str, str]:
        listed = self.sm.list_inference_experiments()["InferenceExperiments"]
        return {e["Name"]: e["Status"] for e in listed}


@pytest.fixture
def account(synth: Synth) -> Iterator[Account]:
    with LocalAWS() as aws:
        players = stage_players(aws, STACK, synth.handler())
        endpoint = WatchedEndpoint(aws.client("sagemaker"))
        players["AWS::SageMaker::Endpoint"] = endpoint
        yield Account(aws, HarnessStack(STACK, players), endpoint, synth)


def _plans(synth: Synth, step: str) -> Any:
    return experiment_plan(synth.stages[step].load_spec())


def test_the_document_gives_the_start_and_the_stop_of_one_stage() -> None:
    maps = doc_stage_maps()
    assert [m["dev"].get("experiment_state", "running") for m in maps] == ["running", "completed"]
    assert maps[0]["dev"]["spec"] == maps[1]["dev"]["spec"]


def test_start_then_end_without_promotion(account: Account) -> None:
    """The endpoint serves the incumbent, an experiment starts beside it, stops in place
    (the candidate's variant removed, the incumbent's config back), then goes."""
    xp = _plans(account.synth, "start")
    account.deploy("end")  # the stage before its experiment: the incumbent alone
    incumbent_config = xp.incumbent.endpoint_config_name
    assert account.serving() == (incumbent_config, ["AllTraffic"], [])
    assert account.preflight("start").status == "pass"
    account.deploy("start")
    assert account.experiments() == {xp.experiment_name: "Running"}
    _, production, shadows = account.serving()
    assert (production, shadows) == (["AllTraffic"], ["Candidate"])
    assert account.stack.actions("AWS::SageMaker::Endpoint") == ["create"]  # not updated
    assert account.preflight("stop").status == "pass"
    account.deploy("stop")
    assert account.experiments() == {xp.experiment_name: "Completed"}
    assert account.serving() == (incumbent_config, ["AllTraffic"], [])  # no candidate fleet
    assert xp.candidate_model_name in account.models()  # until experiment: is removed
    assert account.preflight("end").status == "pass"
    account.deploy("end")
    assert account.experiments() == {}
    assert account.serving() == (incumbent_config, ["AllTraffic"], [])
    assert account.models() == {xp.incumbent.model_name}
    assert account.stack.orphans == []
    assert account.endpoint.live_at_update == []


def test_end_with_promotion_updates_the_endpoint_once_the_experiment_stopped(
    account: Account,
) -> None:
    xp = _plans(account.synth, "start")
    promoted = account.synth.stages["promote"].plan()
    assert promoted.speculative_config == xp.candidate.speculative_config  # the candidate's K
    account.deploy("end")
    account.deploy("start")
    account.deploy("stop")
    assert account.preflight("promote").status == "pass"
    events = account.deploy("promote")
    assert account.serving() == (promoted.endpoint_config_name, ["AllTraffic"], [])
    assert account.endpoint.live_at_update == [None]  # no experiment live during the rollout
    update = events.index(("update", "Endpoint"))
    assert events.index(("delete", "InferenceExperiment")) > update
    assert account.experiments() == {}
    assert account.models() == {promoted.model_name}
    assert account.stack.orphans == []


def test_removing_a_running_experiment_is_refused_and_would_leave_the_candidates_fleet(
    account: Account,
) -> None:
    """What docs/experiments.md said before: remove `experiment:` from a running stage.
    The check refuses it; played anyway, CloudFormation's delete stops the experiment
    keeping both variants: the candidate's shadow variant (its fleet) stays."""
    xp = _plans(account.synth, "start")
    account.deploy("end")
    account.deploy("start")
    verdict = account.preflight("end")
    assert verdict.status == "fail"
    assert f"runs {xp.experiment_name} (Running)" in verdict.detail
    assert "the candidate's fleet would stay" in verdict.detail
    assert "experiment_state: completed" in verdict.fix
    account.deploy("end")  # what the check prevents
    assert account.experiments() == {}
    assert account.serving()[2] == ["Candidate"]


def test_changing_a_running_experiment_is_refused_and_would_start_a_second_one(
    account: Account,
) -> None:
    """Another candidate is another Name (create-only): CloudFormation creates the new
    experiment on the endpoint before it deletes the running one."""
    first = _plans(account.synth, "start").experiment_name
    second = _plans(account.synth, "changed").experiment_name
    assert first != second
    account.deploy("end")
    account.deploy("start")
    verdict = account.preflight("changed")
    assert verdict.status == "fail"
    assert f"declares {second} instead" in verdict.detail
    account.deploy("changed")  # what the check prevents
    replaced = [e.action for e in account.stack.events if e.type.endswith("InferenceExperiment")]
    assert replaced == ["create", "replace", "delete"]  # the second before the first goes


def test_a_stop_without_an_experiment_to_stop_is_refused(account: Account) -> None:
    """`experiment_state: completed` on a stage whose experiment never started: the
    handler's create starts an experiment whatever DesiredState says."""
    account.deploy("end")
    verdict = account.preflight("stop")
    assert verdict.status == "fail"
    assert "CloudFormation's create starts it" in verdict.detail


def test_an_autoscaled_stage_keeps_its_capacity_and_holds_scaling_for_the_test(
    account: Account,
) -> None:
    """min = max = initial_instance_count (2): the experiment's counts are the endpoint's;
    scaling is suspended before the experiment starts and lifted after it stops."""
    aas = account.aws.client("application-autoscaling")

    def suspended() -> set[bool]:
        (target,) = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
        return set(target["SuspendedState"].values())

    def counts() -> dict[str, int]:
        d = account.sm.describe_endpoint(EndpointName=ENDPOINT)
        variants = d["ProductionVariants"] + (d.get("ShadowProductionVariants") or [])
        return {v["VariantName"]: v["CurrentInstanceCount"] for v in variants}

    account.deploy("scaled-end")
    assert (suspended(), counts()) == ({False}, {"AllTraffic": 2})
    order = account.deploy("scaled-start")
    assert (suspended(), counts()) == ({True}, {"AllTraffic": 2, "Candidate": 2})
    assert order.index(("update", "ScalableTarget")) < order.index(
        ("create", "InferenceExperiment")
    )
    order = account.deploy("scaled-stop")
    assert (suspended(), counts()) == ({False}, {"AllTraffic": 2})
    assert order.index(("update", "InferenceExperiment")) < order.index(
        ("update", "ScalableTarget")
    )
    account.deploy("scaled-end")
    assert (suspended(), counts()) == ({False}, {"AllTraffic": 2})
    assert account.experiments() == {}


@pytest.mark.parametrize("end", ["end", "promote"])
def test_a_split_experiment_starts_changes_and_ends_by_updates_of_the_endpoint(
    account: Account, end: str
) -> None:
    """No resource of its own: the experiment is the endpoint's two-variant config.
    Another candidate is one more update (never a second experiment); ending, with or
    without promotion, updates the endpoint onto a one-variant config, and the cleanup
    pass deletes the candidate's model once the endpoint has left it."""
    xp = _plans(account.synth, "split-start")
    account.deploy("end")
    account.deploy("split-start")
    assert account.serving() == (xp.config_name, ["AllTraffic", "Candidate"], [])
    assert account.preflight("split-changed").status == "pass"
    account.deploy("split-changed")
    changed = _plans(account.synth, "split-changed")
    assert account.serving() == (changed.config_name, ["AllTraffic", "Candidate"], [])
    assert account.experiments() == {}  # nothing but configs, all along
    final = account.synth.stages[end].plan()
    events = account.deploy(end)
    assert account.serving() == (final.endpoint_config_name, ["AllTraffic"], [])
    assert account.models() == {final.model_name}
    assert events.index(("update", "Endpoint")) < events.index(("delete", "PeagleModel"))
    assert account.endpoint.live_at_update == [None, None, None]
    assert account.stack.orphans == []
