"""The stage-name rule is one rule: spec, CDK stage map, gates file and promote agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.stages import STAGES_CONTEXT_KEY, stage_configs
from peagle_deploy.errors import InputError
from peagle_deploy.promote.gates import parse_gates
from peagle_deploy.spec import load_spec
from peagle_deploy.spec.stage import STAGE_NAME_RULE, check_stage_name, is_stage_name

ACCEPTED = ["dev", "staging", "prod", "eu-prod", "qa2", "a", "a" * 20, "x-1-y"]
REFUSED = ["1dev", "dev-", "-dev", "Dev", "QA_1", "a" * 21, "dev--2", "", "d.ev", "dév"]


def _accepted_by_spec(name: str) -> bool:
    try:
        load_spec(model="gpt-oss-20b", stage=name)
    except InputError as exc:
        assert exc.field == "stage"
        return False
    return True


def _accepted_by_cdk_stages(name: str, tmp_path: Path) -> bool:
    try:
        stage_configs({name: {"overrides": {"model": "gpt-oss-20b"}}}, tmp_path)
    except InputError as exc:
        assert exc.field == f"{STAGES_CONTEXT_KEY}.{name}"
        return False
    return True


def _accepted_by_gates_file(name: str) -> bool:
    try:
        parse_gates({"stages": {name: {"bench": None}}})
    except InputError as exc:
        assert exc.field.startswith("gates.stages")
        return False
    return True


def _accepted_as_baseline_stage(name: str) -> bool:
    try:
        parse_gates({"stages": {"prod": {"baseline_stage": name}}})
    except InputError as exc:
        assert exc.field == "gates.stages.prod.baseline_stage"
        return False
    return True


def _accepted_by_promote(name: str) -> bool:
    """`peagle promote --from NAME --to ...`: refused before any AWS call, or let through."""
    from peagle_deploy.promote.gates import StageGates
    from peagle_deploy.promote.runner import PromoteOptions, check_inputs

    other = "qa" if name != "qa" else "dev"
    try:
        check_inputs(PromoteOptions(source_stage=name, target_stage=other), StageGates(bench=None))
    except InputError as exc:
        assert exc.field == "--from"
        return False
    return True


@pytest.mark.parametrize("name", ACCEPTED + REFUSED)
def test_every_user_of_stage_names_applies_the_same_rule(name: str, tmp_path: Path) -> None:
    expected = name in ACCEPTED
    assert is_stage_name(name) is expected
    assert _accepted_by_spec(name) is expected
    assert _accepted_by_cdk_stages(name, tmp_path) is expected
    assert _accepted_by_gates_file(name) is expected
    assert _accepted_as_baseline_stage(name) is expected
    assert _accepted_by_promote(name) is expected


def test_a_refused_stage_says_what_is_allowed() -> None:
    with pytest.raises(InputError) as caught:
        check_stage_name("1dev", "--to")
    assert (caught.value.field, caught.value.allowed) == ("--to", STAGE_NAME_RULE)
    with pytest.raises(InputError) as caught:
        load_spec(model="gpt-oss-20b", stage="dev-")
    assert caught.value.allowed == STAGE_NAME_RULE
    with pytest.raises(InputError) as caught:
        parse_gates({"stages": {"Prod": {"bench": None}}})
    assert caught.value.allowed == STAGE_NAME_RULE
