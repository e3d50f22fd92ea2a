"""The `jumpstart` extra installs the part of the SageMaker SDK that JumpStart resolution
uses, and a JumpStart id's plan says that it needs AWS credentials (issue 31, item 7)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from peagle_deploy.catalog import jumpstart
from peagle_deploy.errors import InputError
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
JUMPSTART_PART = "sagemaker.core"
"""What catalog/jumpstart.py imports of the SDK, and the distribution that holds it."""


def _sdk_imports() -> set[str]:
    tree = ast.parse(Path(jumpstart.__file__).read_text(encoding="utf-8"))
    return {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sagemaker")
    }


def test_the_extra_is_the_sdk_part_that_resolution_imports() -> None:
    imported = _sdk_imports()
    assert imported and all(m.startswith(JUMPSTART_PART + ".") for m in imported), imported
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    # sagemaker-core holds sagemaker.core; `sagemaker` (the whole SDK: training, serving,
    # MLOps, with mlflow and pyarrow) took 7 minutes and 1 GB to install for this
    assert [r.split(">=")[0] for r in extras["jumpstart"]] == ["sagemaker-core"]


def test_without_credentials_the_refusal_names_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading JumpStart's bucket needs credentials: the one line says so."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv(jumpstart.MANIFEST_OVERRIDE_ENV, raising=False)
    monkeypatch.delenv(jumpstart.SPECS_OVERRIDE_ENV, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(InputError) as refused:
        build_plan(load_spec(model="openai-reasoning-gpt-oss-20b"))
    assert refused.value.field == "model"
    assert "NoCredentialsError" in refused.value.problem
    assert refused.value.allowed is not None and "AWS credentials" in refused.value.allowed
