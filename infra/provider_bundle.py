"""The model provider's Lambda asset: handler.py, the package files it shares
(SHARED_MODULES), and a pinned, hash-checked botocore.

Lambda's Python runtimes ship their own boto3/botocore, whose version AWS chooses. The
handler needs one that knows CreateModel's PrimaryContainer.AdditionalModelDataSources
(the drafter), so the asset carries its own: exactly the wheels that
`model_provider/requirements.lock` names (botocore and its pure-Python dependencies, each
one version with its sha256), whatever the synthesizing machine has installed. pip
downloads them once into `~/.cache/peagle-deploy/wheels` (`PEAGLE_WHEEL_CACHE`) with
`--require-hashes`; each wheel's sha256 is checked again here before it is unpacked, so
a changed cache file is refused too. Lambda puts the function's directory first on
sys.path, so these win over the runtime's. Only the SageMaker and Secrets Manager
service models are kept of botocore's data (the rest is 30 MB the function never reads);
BUNDLE.json records the versions and the wheels' hashes. The handler still checks the
shape at start and fails with one line if it were missing.

The staged directory lives in the cloud assembly's output directory (cdk.out), keyed by
the content that goes into it, and CDK hashes it like any other asset.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from peagle_deploy.errors import PeagleError

HANDLER_DIR: Final = Path(__file__).parent / "model_provider"
HANDLER_FILE: Final = "handler.py"
PACKAGE_ROOT: Final = Path(__file__).resolve().parents[1]
SHARED_MODULES: Final = (
    "peagle_deploy/__init__.py",
    "peagle_deploy/adoption.py",
    "peagle_deploy/env_limits.py",
    "peagle_deploy/errors.py",
    "peagle_deploy/naming.py",
    "peagle_deploy/redaction.py",
)
"""Files of the package the handler imports (standard library only, so they run alone),
copied into the asset at the same paths: the comparison of an existing model with the
request, CreateModel's environment limits and the one masking of secret values are
shared with the SDK, not copied into the handler."""
LOCK: Final = HANDLER_DIR / "requirements.lock"
KEPT_SERVICE_MODELS: Final = ("sagemaker", "secretsmanager")
MANIFEST: Final = "BUNDLE.json"
_PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+)((?:\s+--hash=sha256:[0-9a-f]{64})+)\s*$")


def wheel_cache() -> Path:
    return Path(
        os.environ.get("PEAGLE_WHEEL_CACHE", Path.home() / ".cache" / "peagle-deploy" / "wheels")
    )


@dataclass(frozen=True)
class Pin:
    """One locked distribution: exact version and the sha256 of its allowed files."""

    name: str
    version: str
    hashes: frozenset[str]

    @property
    def wheel_prefix(self) -> str:
        """How its wheel files start (the normalized name, then the version)."""
        return f"{re.sub(r'[-_.]+', '_', self.name).lower()}-{self.version}-"


def pins(lock: Path = LOCK) -> list[Pin]:
    """The lock's entries; anything but `name==version --hash=sha256:...` is refused."""
    text = lock.read_text().replace("\\\n", " ")
    out = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.match(line)
        if not match:
            raise PeagleError(f"{lock}: not an exact, hashed pin: {line[:80]}")
        hashes = frozenset(re.findall(r"sha256:([0-9a-f]{64})", match[3]))
        out.append(Pin(match[1], match[2], hashes))
    return out


def bundled_versions() -> dict[str, str]:
    return {p.name: p.version for p in pins()}


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _verified_wheel(pin: Pin, cache: Path) -> Path | None:
    """The cached wheel of `pin` whose sha256 is one the lock allows, if any."""
    for candidate in sorted(cache.glob("*.whl")):
        if candidate.name.lower().startswith(pin.wheel_prefix) and _sha256(candidate) in pin.hashes:
            return candidate
    return None


def wheels(lock: Path = LOCK) -> dict[Pin, Path]:
    """Each locked distribution's wheel, downloaded once (pip, --require-hashes) and
    checked against the lock here too."""
    cache = wheel_cache()
    locked = pins(lock)
    found = {p: _verified_wheel(p, cache) for p in locked}
    if any(w is None for w in found.values()):
        cache.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        command += ["--only-binary=:all:", "--require-hashes", "-r", str(lock), "-d", str(cache)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise PeagleError(
                f"could not download the model provider's pinned botocore ({lock.name}): "
                f"{last[:300]}"
            )
        found = {p: _verified_wheel(p, cache) for p in locked}
    missing = [f"{p.name}=={p.version}" for p, w in found.items() if w is None]
    if missing:
        raise PeagleError(
            f"no wheel with a locked sha256 for {', '.join(missing)} in {cache} ({lock.name})"
        )
    return {p: w for p, w in found.items() if w is not None}


def _kept(member: str) -> bool:
    parts = member.split("/")
    if "__pycache__" in parts or member.endswith(".pyc"):
        return False
    # botocore/data/<service>/...: only the services the handler calls
    return not (
        len(parts) > 3 and parts[:2] == ["botocore", "data"] and parts[2] not in KEPT_SERVICE_MODELS
    )


def _key(lock: Path) -> str:
    h = hashlib.sha256((HANDLER_DIR / HANDLER_FILE).read_bytes())
    for module in SHARED_MODULES:
        h.update((PACKAGE_ROOT / module).read_bytes())
    h.update(lock.read_bytes())
    return h.hexdigest()[:16]


def stage(outdir: str | os.PathLike[str], lock: Path = LOCK) -> Path:
    """The asset directory for this handler and the locked botocore, created once under
    `outdir`."""
    target = Path(outdir) / f"peagle-model-provider-{_key(lock)}"
    if (target / MANIFEST).exists():
        return target
    found = wheels(lock)
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    shutil.copy2(HANDLER_DIR / HANDLER_FILE, partial / HANDLER_FILE)
    for module in SHARED_MODULES:
        (partial / module).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PACKAGE_ROOT / module, partial / module)
    for wheel in found.values():
        with zipfile.ZipFile(wheel) as z:
            for member in z.infolist():
                if member.is_dir() or not _kept(member.filename):
                    continue
                path = (partial / member.filename).resolve()
                if not path.is_relative_to(partial.resolve()):
                    raise PeagleError(f"{wheel.name}: member {member.filename!r} escapes the asset")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(z.read(member))
    (partial / MANIFEST).write_text(
        json.dumps(
            {
                "distributions": {p.name: p.version for p in found},
                "wheels": {
                    p.name: {"file": w.name, "sha256": _sha256(w)} for p, w in found.items()
                },
                "service_models": KEPT_SERVICE_MODELS,
                "shared_modules": SHARED_MODULES,
                "lock": lock.name,
            },
            indent=1,
        )
    )
    try:
        partial.rename(target)
    except OSError:  # another process staged the same content first
        shutil.rmtree(partial, ignore_errors=True)
    return target
