"""Derived resource names: what the planner makes is what the SDK and the CDK recognise."""

from __future__ import annotations

import pytest

from peagle_deploy.naming import (
    MAX_NAME,
    default_endpoint_name,
    derived_name,
    derived_name_pattern,
    derived_prefix,
    name_contains,
    sweepable,
)
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec

SHORT = "peagle-gpt-oss-20b-dev"
LONG = "e" * 60 + "-xy"  # 63: cut before the digest


def test_default_endpoint_name_fits_and_keeps_the_stage() -> None:
    assert default_endpoint_name("Qwen3/Coder_30B", "dev") == "peagle-qwen3-coder-30b-dev"
    long = default_endpoint_name("m" * 80, "staging")
    assert len(long) == MAX_NAME and long.endswith("-staging")


@pytest.mark.parametrize("endpoint", [SHORT, LONG, "a-" + "b" * 51 + "-"])
def test_derived_names_fit_and_match_their_pattern(endpoint: str) -> None:
    for kind in ("m", "c"):
        name = derived_name(endpoint, kind, "0123abcd")
        assert len(name) <= MAX_NAME and "--" not in name
        assert derived_name_pattern(endpoint, kind).match(name)
        assert name.startswith(derived_prefix(endpoint, kind))
        assert name.startswith(name_contains(endpoint))
        other = "m" if kind == "c" else "c"
        assert not derived_name_pattern(endpoint, other).match(name)


def test_patterns_do_not_match_other_endpoints_or_hand_made_names() -> None:
    pattern = derived_name_pattern(SHORT, "m")
    assert not pattern.match(derived_name(SHORT + "-2", "m", "0123abcd"))
    assert not pattern.match(SHORT + "-mine")
    assert not pattern.match(SHORT + "-m0123abcd-copy")


def test_digest_must_be_eight_hex_digits() -> None:
    with pytest.raises(ValueError, match="8 hex digits"):
        derived_name(SHORT, "m", "xyz")


def test_only_names_that_keep_their_whole_endpoint_name_are_swept() -> None:
    assert sweepable(SHORT)
    assert not sweepable(LONG)
    assert name_contains(SHORT) == SHORT


def test_the_plan_uses_these_names() -> None:
    plan = build_plan(load_spec(model="gpt-oss-20b"))
    assert plan.endpoint_name == default_endpoint_name("gpt-oss-20b", "dev") == SHORT
    assert derived_name_pattern(SHORT, "m").match(plan.model_name)
    assert derived_name_pattern(SHORT, "c").match(plan.endpoint_config_name)
    assert plan.model_name.startswith(derived_prefix(SHORT, "m"))
