"""Dockerfile.train, read statically (its base is a GPU image this machine cannot run):
the same digest-pinned base as the serving image, recorded versions, hashed pins, an
entrypoint SageMaker's `docker run IMAGE train` reaches, nothing secret or fetched."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from peagle_train import driver

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "Dockerfile.train"
SERVE = ROOT / "Dockerfile"
REQUIREMENTS = ROOT / "container/requirements-train.txt"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        word, _, rest = (pending + line).partition(" ")
        pending = ""
        out.append((word.upper(), rest.strip()))
    return out


def labels(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for word, rest in instructions(path):
        if word == "LABEL":
            found.update(re.findall(r'([\w.\-]+)="([^"]*)"', rest))
    return found


def runs(path: Path) -> list[str]:
    return [rest for word, rest in instructions(path) if word == "RUN"]


def pins() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) from the requirements file."""
    text = REQUIREMENTS.read_text().replace("\\\n", " ")
    found = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)((?:\s+--hash=sha256:[0-9a-f]{64})+)", line)
        assert match, f"not an exact, hashed pin: {line}"
        found[match.group(1)] = (match.group(2), re.findall(r"[0-9a-f]{64}", match.group(3)))
    return found


def test_same_base_rules_as_the_serving_image() -> None:
    words = instructions(TRAIN)
    assert words[0] == ("ARG", "BASE_IMAGE") and words[1] == ("FROM", "${BASE_IMAGE}")
    (check,) = [r for r in runs(TRAIN) if "BASE_IMAGE" in r]
    (serving_check,) = [r for r in runs(SERVE) if "BASE_IMAGE" in r]
    assert check == serving_check
    assert [w for w, _ in words].index("RUN") == 3  # before anything else runs
    digest = "sha256:" + "ab" * 32
    for image, code in {
        f"123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm@{digest}": 0,
        "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:server-sagemaker-cuda-v2.5": 1,
        "python:3.12": 1,
        "localhost/peagle-deploy-test-standin-base:3f2a": 0,
    }.items():
        done = subprocess.run(
            ["sh", "-c", check], env={"BASE_IMAGE": image, "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == code, (image, done.stderr)
    for line in TRAIN.read_text().splitlines():
        if not line.startswith("#"):
            break
        assert not re.match(r"#\s*syntax\s*=", line, re.I)


def test_labels_record_the_versions_the_pins_install() -> None:
    train, serve = labels(TRAIN), labels(SERVE)
    assert train["ai.peagle.base-tag"] == serve["ai.peagle.base-tag"]
    assert train["ai.peagle.vllm-version"] == serve["ai.peagle.vllm-version"]
    assert train["ai.peagle.speculators-version"] == pins()["speculators"][0] == "0.9.0"


def test_every_requirement_is_exact_and_hashed_and_installed_without_resolution() -> None:
    found = pins()
    assert {"speculators", "hs-connectors", "datasets"} <= set(found)
    # hs-connectors is released with speculators (speculators 0.9.0 requires ==0.9.0)
    assert found["hs-connectors"][0] == found["speculators"][0]
    # torch, transformers and vLLM come from the base only
    assert not {"torch", "transformers", "vllm"} & set(found)
    (install,) = [r for r in runs(TRAIN) if "requirements-train.txt" in r]
    assert "pip install --no-deps --no-cache-dir --require-hashes -r" in install
    assert 'python3 -c "import speculators.cli, speculators.train.cli, hs_connectors"' in install


def test_the_driver_is_installed_from_a_bind_mount_and_is_the_entrypoint() -> None:
    words = instructions(TRAIN)
    assert not [w for w, _ in words if w in {"COPY", "ADD"}]
    assert [json.loads(r) for w, r in words if w == "ENTRYPOINT"] == [["peagle-train"]]
    (install,) = [r for r in runs(TRAIN) if "train.pyproject.toml" in r]
    assert "--mount=type=bind,source=container," in install and "--no-build-isolation" in install
    project = tomllib.loads((ROOT / "container/train.pyproject.toml").read_text())
    assert project["project"]["dependencies"] == []
    assert project["project"]["scripts"]["peagle-train"] == "peagle_train.driver:main"
    assert project["tool"]["setuptools"]["packages"] == ["peagle_train"]
    assert driver.main(["serve"]) == 2  # what `docker run IMAGE serve` would get


def test_the_build_context_holds_what_the_build_mounts() -> None:
    ignore = [
        line.strip()
        for line in (ROOT / "Dockerfile.train.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ignore[0] == "*"
    for needed in (
        "container/peagle_train/",
        "container/train.pyproject.toml",
        "container/requirements-train.txt",
    ):
        assert "!" + needed in ignore
        assert (ROOT / needed).exists()


@pytest.mark.parametrize("word", ["SECRET", "PASSWORD", "TOKEN", "AWS_ACCESS_KEY", "API_KEY"])
def test_nothing_secret_and_nothing_fetched_at_run_time(word: str) -> None:
    text = " ".join(f"{w} {r}" for w, r in instructions(TRAIN) if w in {"ENV", "ARG", "LABEL"})
    assert word not in text.upper()
    commands = " ".join(runs(TRAIN))
    assert not re.search(r"\b(curl|wget|git clone)\b", commands)
    envs = " ".join(r for w, r in instructions(TRAIN) if w == "ENV")
    for offline in ("HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1", "HF_DATASETS_OFFLINE=1"):
        assert offline in envs
