"""Derived resource names: what the planner makes is what the SDK and the CDK recognise."""

from __future__ import annotations

import fnmatch
import json
import random
from pathlib import Path

import pytest

from peagle_deploy.catalog import MODELS
from peagle_deploy.naming import (
    MAX_NAME,
    default_endpoint_name,
    derived_grant,
    derived_head,
    derived_name,
    derived_name_pattern,
    derived_prefix,
    name_contains,
    name_digest,
    sweepable,
)
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
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


# --- one identity per endpoint (issue 29, High) ------------------------------------------

_OLD_HEAD_LEN = 53
"""The head before issue 29: the first 53 characters of the endpoint name, nothing else."""


def _old_head(endpoint: str) -> str:
    return endpoint[:_OLD_HEAD_LEN].rstrip("-")


def _generated(seed: int, length: int) -> str:
    """A valid endpoint name of `length` characters (letters, digits, single dashes)."""
    rng = random.Random(seed)
    chars = [rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(length)]
    for i in range(1, length - 1):
        if rng.random() < 0.15 and chars[i - 1] != "-":
            chars[i] = "-"
    return "".join(chars)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_names_that_fit_keep_every_derived_name_byte_for_byte(model: str) -> None:
    """No churn: every default endpoint name of the catalog's models, in the stages of
    cdk.json and the usual ones, keeps the head (so the model and config names) it had."""
    stages = {"dev", "staging", "prod", "qa", "eu-prod", "canary"}
    stages |= set(json.loads((ROOT / "cdk.json").read_text())["context"]["peagle:stages"])
    for stage in sorted(stages):
        endpoint = default_endpoint_name(model, stage)
        assert len(endpoint) <= _OLD_HEAD_LEN, endpoint
        assert derived_head(endpoint) == _old_head(endpoint) == endpoint
        for kind in ("m", "c"):
            assert derived_prefix(endpoint, kind) == f"{_old_head(endpoint)}-{kind}"
    plan = build_plan(load_spec(model=model, stage="prod"))
    assert plan.model_name.startswith(_old_head(plan.endpoint_name) + "-m")
    assert plan.endpoint_config_name.startswith(_old_head(plan.endpoint_name) + "-c")


@pytest.mark.parametrize("length", range(1, MAX_NAME + 1))
def test_every_length_fits_and_names_that_fit_are_their_own_head(length: int) -> None:
    endpoint = _generated(length, length)
    head = derived_head(endpoint)
    assert len(derived_name(endpoint, "m", "0123abcd")) <= MAX_NAME
    if length <= _OLD_HEAD_LEN:
        assert head == endpoint
    else:
        assert head.endswith("-" + name_digest(endpoint)) and len(head) <= _OLD_HEAD_LEN


def test_long_names_that_share_53_characters_do_not_share_a_head() -> None:
    """The finding: `<53 shared characters>-dev` and `...-prod` had one head, so one
    model grant. Generated names: equal 53-character prefixes, and names equal but for
    their last character."""
    cases = []
    for seed in range(50):
        base = _generated(seed, _OLD_HEAD_LEN).rstrip("-")
        cases.append([f"{base}-dev", f"{base}-staging", f"{base}-prod"])
        long = _generated(1000 + seed, MAX_NAME - 1)
        cases.append([long + "a", long + "b", long + "7"])
    for names in cases:
        assert len({_old_head(n) for n in names}) == 1  # what main did
        heads = [derived_head(n) for n in names]
        assert len(set(heads)) == len(names), names
        for a in names:
            for b in names:
                if a != b:
                    for kind in ("m", "c"):
                        assert not derived_name_pattern(a, kind).match(
                            derived_name(b, kind, "0123abcd")
                        )


def test_a_name_and_its_spellings_keep_one_identity() -> None:
    """SageMaker takes endpoint names case-insensitively: the digest is of the lowercase
    name, so two spellings of one long endpoint keep the same digest."""
    long = _generated(7, 60)
    assert name_digest(long) == name_digest(long.upper())


def test_long_names_and_names_shaped_like_a_cut_head_are_never_swept_by_name() -> None:
    long = _generated(3, 60)
    head = derived_head(long)
    assert not sweepable(long)
    assert not sweepable(head)  # a short name spelled like a long one's head
    assert derived_head(head) == head  # ... would share its derived names
    assert sweepable(SHORT)
    assert sweepable("peagle-gpt-oss-20b-a1b2c3")  # a stage of hex digits, not 12 of them
    assert name_contains(long) == head


def test_the_grant_is_the_pattern_of_the_derived_names() -> None:
    for endpoint in (SHORT, LONG, _generated(11, 62)):
        for kind in ("m", "c"):
            grant = derived_grant(endpoint, kind)
            name = derived_name(endpoint, kind, "89abcdef")
            assert fnmatch.fnmatchcase(name, grant)
            assert not fnmatch.fnmatchcase(name + "0", grant)
            assert not fnmatch.fnmatchcase(f"{endpoint}-mirror", grant)
