"""The planner is a pipeline: resolve once, check once, render once.

Traced with `sys.setprofile` over one `build_plan`: every function of the package that
runs is counted, so a rule or a default that is computed twice shows up here.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from peagle_deploy.plan import build_plan, plan_of, with_speculative
from peagle_deploy.plan.check import RULES
from peagle_deploy.plan.resolve import resolve
from peagle_deploy.spec import load_spec
from peagle_deploy.spec.models import SpeculativeDecodingSpec

PACKAGE = Path(__file__).resolve().parents[2] / "peagle_deploy"
PLAN_MODULES = (
    "plan",
    "deployment.py",
    "validation",
    "catalog",
)
"""What a plan runs: the pipeline, its record, the checks and the catalog it resolves from."""
MAX_FUNCTION_LINES = 80


def _traced(call: Callable[[], Any]) -> Counter[str]:
    """`module.function` -> how many times it ran during `call()` (package code only)."""
    seen: Counter[str] = Counter()

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("peagle_deploy"):
                seen[f"{module}.{frame.f_code.co_name}"] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def test_no_plan_function_is_longer_than_80_lines() -> None:
    long = []
    for part in PLAN_MODULES:
        root = PACKAGE / part
        for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(PACKAGE)}:{node.name} ({lines} lines)")
    assert long == []


@pytest.mark.parametrize(
    "speculative",
    [
        {"num_speculative_tokens": 4},
        {"mode": "eagle3", "num_speculative_tokens_per_batch_size": [[1, 8, 3], [9, 64, 2]]},
    ],
)
def test_k_and_the_speculative_config_are_resolved_once(speculative: dict[str, Any]) -> None:
    spec = load_spec(model="gpt-oss-20b", speculative=speculative)
    calls = _traced(lambda: build_plan(spec))
    once = [
        "peagle_deploy.plan.resolve.resolve",
        "peagle_deploy.plan.resolve._speculation",
        "peagle_deploy.plan.resolve.speculative_config",
        "peagle_deploy.plan.resolve.speculative_config_json",
        "peagle_deploy.plan.check.check",
        "peagle_deploy.plan.render.render",
        "peagle_deploy.validation.speculative.check_speculative",
        "peagle_deploy.validation.speculative.check_k_bound",
        "peagle_deploy.catalog.engines.default_image",
    ]
    assert {name: calls[name] for name in once} == dict.fromkeys(once, 1)


def test_every_rule_runs_once_and_takes_the_deployment() -> None:
    spec = load_spec(model="gpt-oss-20b", execution_role_arn="arn:aws:iam::123456789012:role/r")
    calls = _traced(lambda: build_plan(spec))
    for rule in RULES:
        assert calls[f"{rule.__module__}.{rule.__name__}"] == 1, rule.__name__
        assert list(rule.__annotations__) == ["dep", "return"], rule.__name__


def test_the_plan_is_the_deployment_plus_names_requests_and_findings() -> None:
    plan = build_plan(load_spec(model="gpt-oss-20b", speculative={"num_speculative_tokens": 4}))
    dep = plan.deployment
    env = plan.create_model["PrimaryContainer"]["Environment"]
    assert env == dict(dep.environment)
    assert plan.num_speculative_tokens == dep.speculative.num_speculative_tokens == 4
    assert plan.speculative_config == dict(dep.speculative.config or {})
    assert '"num_speculative_tokens":4' in env["SM_VLLM_SPECULATIVE_CONFIG"]


def test_origins_say_where_each_value_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    dep = resolve(load_spec(model="gpt-oss-20b", instance_type="ml.g7e.12xlarge"))
    assert dep.origin("region") == "environment" and dep.region_field == "AWS_REGION"
    assert dep.origin("instance_type") == "spec"
    assert dep.origin("speculative.num_speculative_tokens") == "catalog"
    assert dep.origin("image_uri") == "default"
    assert dep.origin("execution_role_arn") == "default"
    custom = resolve(
        load_spec(
            model="custom",
            instance_type="ml.g7e.2xlarge",
            custom={
                "image_uri": "123456789012.dkr.ecr.us-west-2.amazonaws.com/own:1",
                "model_data_uri": "s3://bucket/model/",
                "drafter_uri": "s3://bucket/drafter/",
            },
        )
    )
    assert custom.origin("image_uri") == "spec"
    assert custom.origin("speculative.num_speculative_tokens") == "default"
    assert custom.speculative.drafter is not None
    assert custom.speculative.drafter.kind == "p-eagle"
    assert custom.origin("speculative.drafter_kind") == "default"


def test_a_candidate_differs_only_in_its_speculative_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    incumbent = resolve(load_spec(model="gpt-oss-20b", stage="prod"))

    def no_second_lookup(*_: Any, **__: Any) -> Any:
        raise AssertionError("the candidate re-resolved the model reference")

    monkeypatch.setattr("peagle_deploy.plan.resolve.resolve_model", no_second_lookup)
    candidate = with_speculative(
        incumbent, SpeculativeDecodingSpec(mode="eagle3", num_speculative_tokens=2)
    )
    assert candidate.speculative.num_speculative_tokens == 2
    assert candidate.speculative.config is not None
    assert "parallel_drafting" not in candidate.speculative.config
    assert candidate.source is incumbent.source
    assert candidate.endpoint_name == incumbent.endpoint_name
    assert candidate.instance_type == incumbent.instance_type
    a, b = plan_of(incumbent), plan_of(candidate)  # the same checks run on both
    assert a.model_name != b.model_name
    assert any("drafts sequentially" in w for w in b.warnings)


def test_a_candidate_is_checked_like_any_deployment() -> None:
    from peagle_deploy.errors import InputError

    incumbent = resolve(load_spec(model="gpt-oss-20b"))
    too_many = SpeculativeDecodingSpec(num_speculative_tokens=500)
    with pytest.raises(InputError, match=r"speculative\.num_speculative_tokens: 500 is too many"):
        plan_of(with_speculative(incumbent, too_many))
