"""Session fixtures: each app is synthesized once (seconds each) and shared by the tests,
also across pytest-xdist workers (see cdk_helpers.synthesize_once)."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from cdk_helpers import (
    ROOT,
    Synthesized,
    cdk_context,
    edge_stage,
    environ,
    experiment_stage,
    synthesize,
    synthesize_once,
)

from infra.stages import STAGES_CONTEXT_KEY, stage_configs


class _EbsInstance:
    """Stands in for a catalog entry of an EBS-backed instance family (the catalog
    only lists families without EBS, catalog/data/instances.json), to reach the volume-key
    branch."""

    class ebs_volume:  # noqa: N801  (mirrors InstanceType.ebs_volume.value)
        value = True


@pytest.fixture(scope="session")
def stage_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The three example stages of cdk.json, synthesized with cdk-nag."""
    context = cdk_context()
    stages = stage_configs(context[STAGES_CONTEXT_KEY], ROOT)

    def build(outdir: Path) -> Synthesized:
        with environ(CDK_DEFAULT_ACCOUNT=None):
            return synthesize(stages, outdir, context=context)

    return synthesize_once("stages", tmp_path_factory, build)


def _edge(outdir: Path, *, acknowledgements: bool) -> Synthesized:
    patches = [mock.patch("infra.endpoint.get_instance", lambda name: _EbsInstance())]
    if not acknowledgements:
        patches.append(mock.patch("infra.nag.Validations"))
    for p in patches:
        p.start()
    try:
        return synthesize([edge_stage()], outdir, context=cdk_context())
    finally:
        for p in patches:
            p.stop()


@pytest.fixture(scope="session")
def edge_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The edge stage (see edge_stage), synthesized with cdk-nag."""
    return synthesize_once("edge", tmp_path_factory, lambda out: _edge(out, acknowledgements=True))


@pytest.fixture(scope="session")
def edge_synth_unacknowledged(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The same edge stage with every acknowledgement switched off."""
    return synthesize_once(
        "edge-noack", tmp_path_factory, lambda out: _edge(out, acknowledgements=False)
    )


@pytest.fixture(scope="session")
def experiment_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The experiment stage, synthesized with cdk-nag."""

    def build(outdir: Path) -> Synthesized:
        with environ(CDK_DEFAULT_ACCOUNT=None):
            return synthesize([experiment_stage()], outdir, context=cdk_context())

    return synthesize_once("experiment", tmp_path_factory, build)


@pytest.fixture(scope="session")
def all_synths(
    stage_synth: Synthesized, edge_synth: Synthesized, experiment_synth: Synthesized
) -> list[Synthesized]:
    """Every app, for checks that apply to every stack."""
    return [stage_synth, edge_synth, experiment_synth]
