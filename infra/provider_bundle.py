"""The model provider's Lambda asset: handler.py plus a pinned botocore, without Docker.

Lambda's Python runtimes ship their own boto3/botocore, whose version AWS chooses. The
handler needs one that knows CreateModel's PrimaryContainer.AdditionalModelDataSources
(the drafter), so the asset carries its own: the botocore (and its pure-Python
dependencies) installed where the app is synthesized, which the project pins through
its dependencies, copied file by file. Lambda puts the function's directory first on
sys.path, so these win over the runtime's. Only the SageMaker service model is kept of
botocore's data (the rest is 30 MB the function never reads); BUNDLE.json records the
versions. The handler still checks the shape at start and fails with one line if it
were missing.

The staged directory lives in the cloud assembly's output directory (cdk.out), keyed by
the content that goes into it, and CDK hashes it like any other asset.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
from pathlib import Path
from typing import Final

HANDLER_DIR: Final = Path(__file__).parent / "model_provider"
HANDLER_FILE: Final = "handler.py"
# Distributions copied into the asset: botocore and what it imports.
DISTRIBUTIONS: Final = ("botocore", "jmespath", "python-dateutil", "urllib3", "six")
KEPT_SERVICE_MODELS: Final = ("sagemaker",)
MANIFEST: Final = "BUNDLE.json"


def bundled_versions() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in DISTRIBUTIONS}


def _top_level(dist: importlib.metadata.Distribution) -> list[Path]:
    names = {
        Path(str(f)).parts[0]
        for f in dist.files or []
        if Path(str(f)).parts and Path(str(f)).parts[0] not in ("..", "__pycache__")
    }
    return [Path(str(dist.locate_file(name))) for name in sorted(names)]


def _ignore(directory: str, names: list[str]) -> list[str]:
    ignored = [n for n in names if n == "__pycache__" or n.endswith(".pyc")]
    parts = Path(directory).parts
    if len(parts) >= 2 and parts[-2:] == ("botocore", "data"):
        ignored += [
            n
            for n in names
            if os.path.isdir(os.path.join(directory, n)) and n not in KEPT_SERVICE_MODELS
        ]
    return ignored


def _key(versions: dict[str, str]) -> str:
    h = hashlib.sha256((HANDLER_DIR / HANDLER_FILE).read_bytes())
    h.update(json.dumps(versions, sort_keys=True).encode())
    return h.hexdigest()[:16]


def stage(outdir: str | os.PathLike[str]) -> Path:
    """The asset directory for this handler and botocore, created once under `outdir`."""
    versions = bundled_versions()
    target = Path(outdir) / f"peagle-model-provider-{_key(versions)}"
    if (target / MANIFEST).exists():
        return target
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    shutil.copy2(HANDLER_DIR / HANDLER_FILE, partial / HANDLER_FILE)
    for name in DISTRIBUTIONS:
        for path in _top_level(importlib.metadata.distribution(name)):
            if path.is_dir():
                shutil.copytree(path, partial / path.name, ignore=_ignore)
            else:
                shutil.copy2(path, partial / path.name)
    (partial / MANIFEST).write_text(
        json.dumps({"distributions": versions, "service_models": KEPT_SERVICE_MODELS}, indent=1)
    )
    try:
        partial.rename(target)
    except OSError:  # another process staged the same content first
        shutil.rmtree(partial, ignore_errors=True)
    return target
