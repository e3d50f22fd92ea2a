"""load_spec: files (YAML/JSON), nested and dotted overrides, overrides win."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from peagle_deploy.errors import InputError
from peagle_deploy.spec import DeploymentSpec, load_spec

YAML = """
model: gpt-oss-20b
stage: staging
speculative:
  mode: p-eagle
  num_speculative_tokens: 5
  drafter_channel: eagle
env:
  SM_VLLM_GPU_MEMORY_UTILIZATION: "0.9"
tags:
  team: ml
"""


def test_yaml_file_and_nested_override_merge(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(YAML)
    spec = load_spec(path, speculative={"num_speculative_tokens": 7}, env={"HF_HUB_OFFLINE": "1"})
    assert spec.speculative.num_speculative_tokens == 7
    assert spec.speculative.mode == "p-eagle"  # the file's value survives the merge
    assert spec.env == {"SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9", "HF_HUB_OFFLINE": "1"}
    assert spec.stage == "staging" and spec.tags == {"team": "ml"}


def test_json_file_and_dotted_override(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"model": "gpt-oss-20b", "rollout": {"strategy": "linear"}}))
    spec = load_spec(path, **{"rollout.alarms": ["p99"], "speculative.mode": "eagle3"})
    assert spec.rollout.strategy == "linear" and spec.rollout.alarms == ["p99"]
    assert spec.speculative.mode == "eagle3"


def test_none_overrides_do_not_clobber(tmp_path: Path) -> None:
    path = tmp_path / "spec.yml"
    path.write_text("model: gpt-oss-20b\ninstance_type: ml.g7e.4xlarge\n")
    spec = load_spec(path, instance_type=None, model="gpt-oss-120b")
    assert spec.instance_type == "ml.g7e.4xlarge" and spec.model == "gpt-oss-120b"


def test_keywords_only_and_defaults() -> None:
    spec = load_spec(model="qwen3-coder-30b-a3b-instruct")
    assert isinstance(spec, DeploymentSpec)
    assert spec.network_isolation is True
    assert spec.speculative.drafter_channel == "eagle"
    assert spec.stage == "dev"


def test_empty_file_needs_a_model(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(InputError, match=r"^model: "):
        load_spec(path)
    assert load_spec(path, model="gpt-oss-20b").model == "gpt-oss-20b"


def test_dotted_override_into_scalar_is_refused() -> None:
    with pytest.raises(InputError, match=r"stage\.x"):
        dotted: dict[str, Any] = {"stage.x": 1}
        load_spec(model="gpt-oss-20b", stage="dev", **dotted)


def test_every_field_has_a_docstring() -> None:
    def walk(model: type) -> None:
        for name, info in model.model_fields.items():  # type: ignore[attr-defined]
            assert info.description, f"{model.__name__}.{name} has no docstring"
            for arg in getattr(info.annotation, "__args__", (info.annotation,)):
                if isinstance(arg, type) and hasattr(arg, "model_fields"):
                    walk(arg)

    walk(DeploymentSpec)


def test_unquoted_yaml_env_values_become_strings(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        "model: gpt-oss-20b\nenv:\n  SM_VLLM_GPU_MEMORY_UTILIZATION: 0.92\n"
        "  SM_VLLM_ENFORCE_EAGER: true\n  SM_VLLM_MAX_NUM_SEQS: 64\ntags:\n  cost-center: 1234\n"
    )
    spec = load_spec(path)
    assert spec.env == {
        "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.92",
        "SM_VLLM_ENFORCE_EAGER": "true",
        "SM_VLLM_MAX_NUM_SEQS": "64",
    }
    assert spec.tags == {"cost-center": "1234"}


def test_spec_round_trips_through_json_dump() -> None:
    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import spec_from_dict

    spec = load_spec(
        model="gpt-oss-20b",
        speculative={
            "mode": "eagle3",  # a K schedule with P-EAGLE is refused (vllm#45695)
            "num_speculative_tokens": 5,
            "num_speculative_tokens_per_batch_size": [[1, 8, 5]],
        },
        rollout={"alarms": ["a"]},
        vpc={"subnet_ids": ["subnet-0123abcd"], "security_group_ids": ["sg-0123abcd"]},
    )
    again = spec_from_dict(
        json.loads(json.dumps(spec.model_dump(mode="json", exclude_defaults=True)))
    )
    assert again == spec
    assert build_plan(again).to_json() == build_plan(spec).to_json()
