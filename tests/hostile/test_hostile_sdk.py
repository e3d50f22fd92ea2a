"""The hostile-input corpus through the Python entry points: `plan_for()` /
`deploy_peagle()` keywords, endpoint handles, and cdk.json's `peagle:stages` maps (as the
CDK app receives them: parsed from cdk.json, or as text from `-c`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hostile_kit import (
    HF_TOKEN,
    MODEL,
    ROLE,
    assert_input_error,
    billion_laughs,
    recording_aws_calls,
)

ROOT = Path(__file__).resolve().parents[2]


def _plan(**knobs: Any) -> Callable[[], Any]:
    from peagle_deploy.sdk import plan_for

    return lambda: plan_for(MODEL, **knobs)


def _deploy(**knobs: Any) -> Callable[[], Any]:
    from peagle_deploy.sdk import deploy_peagle

    return lambda: deploy_peagle(MODEL, role_arn=ROLE, wait=False, **knobs)


def _handle(name: str, **kw: Any) -> Callable[[], Any]:
    from peagle_deploy.sdk import PeagleEndpoint

    return lambda: PeagleEndpoint.from_name(name, **kw).status()


def _stages(context: Any) -> Callable[[], Any]:
    from infra.stages import stage_configs

    def run() -> Any:
        return [stage.plan() for stage in stage_configs(context, ROOT)]

    return run


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


KEYWORDS: list[tuple[str, Callable[[], Callable[[], Any]], str]] = [
    ("region-empty", lambda: _plan(region=""), "region"),
    ("instance-type-empty", lambda: _plan(instance_type=""), "instance_type"),
    ("endpoint-name-empty", lambda: _plan(endpoint_name=""), "endpoint_name"),
    ("role-empty", lambda: _plan(role_arn=""), "role_arn"),
    ("alarms-empty-item", lambda: _plan(alarms=["ok", ""]), "alarms"),
    ("env-list-token", lambda: _plan(env=[f"HF_TOKEN={HF_TOKEN}", "bad"]), "env"),
    ("env-string-token", lambda: _plan(env=f"HF_TOKEN={HF_TOKEN}"), "env"),
    ("env-deep", lambda: _plan(env=_deep(40)), "env"),
    ("k-huge", lambda: _plan(num_speculative_tokens=10**20), "speculative.num_speculative_tokens"),
    (
        "k-vs-max-model-len",
        lambda: _plan(num_speculative_tokens=300, max_model_len=256),
        "speculative.num_speculative_tokens",
    ),
    ("k-float", lambda: _plan(num_speculative_tokens=3.5), "speculative.num_speculative_tokens"),
    ("k-text", lambda: _plan(num_speculative_tokens="many"), "speculative.num_speculative_tokens"),
    ("count-huge", lambda: _plan(initial_instance_count=2**31), "initial_instance_count"),
    ("weights-nan", lambda: _plan(custom={"weights_gb": float("nan")}), "custom.weights_gb"),
    ("weights-inf", lambda: _plan(custom={"weights_gb": float("inf")}), "custom.weights_gb"),
    ("endpoint-name-5mb", lambda: _plan(endpoint_name="e" * 5_000_000), "endpoint_name"),
    ("tag-emoji-key", lambda: _plan(tags={"aws:x": "1"}), "tags.aws:x"),
    ("deploy-region-empty", lambda: _deploy(region=""), "region"),
    (
        "deploy-k-huge",
        lambda: _deploy(num_speculative_tokens=10**6),
        "speculative.num_speculative_tokens",
    ),
    ("handle-bad-name", lambda: _handle("bad name"), "endpoint_name"),
    ("handle-5mb-name", lambda: _handle("n" * 5_000_000), "endpoint_name"),
    ("handle-region-empty", lambda: _handle("peagle-x-dev", region=""), "region"),
    ("spec-file-bomb", lambda: _plan_file(billion_laughs("model")), "spec_file"),
    ("custom-deep-5000", lambda: _plan(custom=_deep(5000)), "custom"),
    ("alarms-deep-list", lambda: _plan(alarms=_deep_list(5000)), "rollout.alarms"),
    ("dotted-deep", lambda: _plan(**{"rollout.alarms": _deep_list(100)}), "rollout.alarms"),
]


def _plan_file(text: str) -> Callable[[], Any]:
    import tempfile

    from peagle_deploy.sdk import plan_for

    path = Path(tempfile.mkdtemp()) / "bomb.yaml"
    path.write_text(text)
    return lambda: plan_for(spec_file=str(path))


def _deep_list(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


STAGE_KEY = "peagle:stages"
STAGE_MAPS: list[tuple[str, Any, str]] = [
    ("text-dup-stage", '{"dev": {"spec": "stages/dev.yaml"}, "dev": {}}', STAGE_KEY),
    ("text-deep", '{"dev": ' + "[" * 5000 + "]" * 5000 + "}", STAGE_KEY),
    ("text-nan", '{"dev": {"spec": "stages/dev.yaml", "log_retention_days": NaN}}', STAGE_KEY),
    ("text-invalid", "{dev: spec}", STAGE_KEY),
    ("parsed-deep", {"dev": {"spec": "stages/dev.yaml", "overrides": _deep(200)}}, STAGE_KEY),
    (
        "parsed-inf",
        {"dev": {"overrides": {"model": MODEL, "max_model_len": float("inf")}}},
        STAGE_KEY,
    ),
    ("stage-text-dup", {"dev": '{"spec": "stages/dev.yaml", "spec": "x"}'}, f"{STAGE_KEY}.dev"),
    ("bad-stage-name", {"Prod\u274c": {"spec": "stages/prod.yaml"}}, f"{STAGE_KEY}.Prod\u274c"),
    ("overrides-empty-region", {"dev": {"overrides": {"model": MODEL, "region": ""}}}, "region"),
    (
        "overrides-k-huge",
        {"dev": {"overrides": {"model": MODEL, "speculative.num_speculative_tokens": 10**9}}},
        "speculative.num_speculative_tokens",
    ),
    ("spec-file-missing", {"dev": {"spec": "stages/nope.yaml"}}, f"{STAGE_KEY}.dev.spec"),
]


@pytest.mark.parametrize(("name", "make", "field"), KEYWORDS, ids=[k[0] for k in KEYWORDS])
def test_sdk_keywords_refused_cleanly(
    name: str, make: Callable[[], Callable[[], Any]], field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with recording_aws_calls(monkeypatch) as calls:
        assert_input_error(make(), calls, field)


@pytest.mark.parametrize(("name", "context", "field"), STAGE_MAPS, ids=[s[0] for s in STAGE_MAPS])
def test_cdk_stage_maps_refused_cleanly(
    name: str, context: Any, field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with recording_aws_calls(monkeypatch) as calls:
        assert_input_error(_stages(context), calls, field)


def test_stage_file_bomb_names_the_stage_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs("model"))
    with recording_aws_calls(monkeypatch) as calls:
        text = assert_input_error(
            _stages({"dev": {"spec": str(bomb)}}), calls, f"{STAGE_KEY}.dev.spec"
        )
    assert "aliases expand" in text


def test_cdk_json_itself_passes() -> None:
    """The positive control for the stage maps: the repository's cdk.json plans."""
    from infra.stages import stage_configs

    context = json.loads((ROOT / "cdk.json").read_text())["context"][STAGE_KEY]
    assert [s.plan().spec.stage for s in stage_configs(context, ROOT)] == ["dev", "staging", "prod"]
