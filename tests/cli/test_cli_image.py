"""`peagle image base` and `make image`: the Dockerfile's base in each region's registry.

The oracle is sagemaker-core's own `image_uris.retrieve("vllm-server", region, "2.5")`,
the code the catalog's registry data was read from, run here: for every region the
catalog knows, both give the same URI or both refuse.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from peagle_deploy.catalog.images import images, own_image, registries
from peagle_deploy.cli.app import main

ROOT = Path(__file__).resolve().parents[2]


def _base(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["image", "base", *argv])
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


def _recorded_core_version() -> str:
    source = next(iter(json.loads((ROOT / "peagle_deploy/catalog/data/images.json").read_text())
                       ["regions"].values()))["source"]  # fmt: skip
    return str(source["pypi"]).split("==", 1)[1]


def test_every_region_matches_sagemaker_core(capsys: pytest.CaptureFixture[str]) -> None:
    from sagemaker.core import image_uris

    tag = own_image()["base_tag"]
    sdk_version = re.fullmatch(r"server-sagemaker-cuda-v(\d+\.\d+)", tag)
    assert sdk_version is not None, tag
    same_release = version("sagemaker-core") == _recorded_core_version()
    published = 0
    for region in sorted(registries()):
        code, out, err = _base(capsys, "--region", region)
        try:
            expected: str | None = image_uris.retrieve(
                framework="vllm-server", region=region, version=sdk_version.group(1)
            )
        except ValueError:
            expected = None
        if code == 0:
            published += 1
            if expected is not None or same_release:
                assert out == expected, (region, out, expected)
        else:
            assert code == 2 and err.startswith("error: --region: ") and "not published" in err
            if same_release:
                assert expected is None, (region, expected)
    assert published == len(images()[tag].regions) == 35


def test_the_region_comes_from_the_environment_like_the_plans(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-south-1")
    code, out, _ = _base(capsys)
    assert code == 0 and out.startswith("692866216735.dkr.ecr.eu-south-1.amazonaws.com/vllm:")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    code, out, _ = _base(capsys)
    assert code == 0 and out.startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:")
    code, out, _ = _base(capsys, "--region", "af-south-1", "--json")
    doc = json.loads(out)
    assert doc["registry"] == "626614931356.dkr.ecr.af-south-1.amazonaws.com"
    assert doc["vllm"] == "0.30.0+amzn2023.ec4a3a53" and doc["tag"] == own_image()["base_tag"]


def test_the_docs_login_line_gets_the_registry_host() -> None:
    """docs/container.md logs in to `${BASE%%/*}` with BASE from `peagle image base`."""
    script = 'BASE=$(peagle image base --region af-south-1) && printf %s "${BASE%%/*}"'
    peagle_dir = str(Path(sys.executable).parent)
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, check=True,
        env={"PATH": f"{peagle_dir}:/usr/bin:/bin"},
    )  # fmt: skip
    assert done.stdout == "626614931356.dkr.ecr.af-south-1.amazonaws.com"


def test_make_image_builds_from_the_catalogs_base() -> None:
    """`make image` (dry run: no docker here) passes the region's base as BASE_IMAGE,
    pinned by the digest its tag names now; the Dockerfile has no default base to fall
    back to, and refuses a tag."""
    done = subprocess.run(
        ["make", "-n", "image", "REGION=me-central-1", "IMAGE=x"], cwd=ROOT,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert 'peagle image base --region "me-central-1"' in done.stdout
    assert 'imagetools inspect "$base"' in done.stdout
    assert '--build-arg BASE_IMAGE="${base%:*}@$digest"' in done.stdout
    assert '-t "x" .' in done.stdout
    printed = subprocess.run(
        ["make", "-s", "image-base", "REGION=me-central-1"], cwd=ROOT,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert printed.stdout.strip() == images()[own_image()["base_tag"]].uri("me-central-1")
    refused = subprocess.run(
        ["make", "-s", "image-base", "REGION=cn-north-1"], cwd=ROOT,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and "not published in cn-north-1" in refused.stderr
