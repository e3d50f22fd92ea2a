"""The Dockerfile's structure and the stdlib-only packaging (no docker engine here)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from peagle_serve import contract

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
CONTAINER = ROOT / "container"
PACKAGE = CONTAINER / "peagle_serve"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def build_args() -> dict[str, str | None]:
    """The ARGs declared before FROM: their default, or None when they have none."""
    values: dict[str, str | None] = {}
    for word, rest in instructions():
        if word == "FROM":
            break
        if word == "ARG":
            name, eq, default = rest.partition("=")
            values[name] = default if eq else None
    return values


def labels() -> dict[str, str]:
    found: dict[str, str] = {}
    for word, rest in instructions():
        if word == "LABEL":
            for key, value in re.findall(r'([\w.\-]+)="([^"]*)"', rest):
                found[key] = value
    return found


def script_vllm_version() -> str:
    match = re.search(
        r'VLLM_VERSION="\$\{VLLM_VERSION:-([^}]+)\}"', (ROOT / "scripts/vllm-env.sh").read_text()
    )
    assert match, "scripts/vllm-env.sh must pin VLLM_VERSION"
    return match.group(1)


def test_base_image_is_required_and_pinned_by_the_base_tag_label() -> None:
    """No default base: the one the Dockerfile used to default to (account 763104351884)
    is wrong in 29 of the 45 regions; `peagle image base --region R` (the catalog) gives
    it. The LABEL pins the tag, and the catalog's own_image reads it."""
    assert build_args() == {"BASE_IMAGE": None}
    assert "763104351884" not in "".join(rest for _, rest in instructions())
    assert labels()["ai.peagle.base-tag"] == "vllm:server-sagemaker-cuda-v2.5"
    own = json.loads((ROOT / "peagle_deploy/catalog/data/images.json").read_text())["own_image"]
    assert "vllm:" + own["base_tag"] == labels()["ai.peagle.base-tag"]


def _base_check() -> str:
    (script,) = [rest for word, rest in instructions() if word == "RUN" and "BASE_IMAGE" in rest]
    return script


def test_a_base_must_be_pinned_by_digest_unless_built_here() -> None:
    """A tag can be moved to other content: the build refuses any base without a digest,
    Docker Hub's short names included (issue 29: `python:3.12` passed the old rule, which
    only looked for a `/`), before anything else runs; only names under `localhost/`
    (built on this machine) may be a tag. The check is the Dockerfile's own RUN, run here
    by sh as the builder would."""
    order = [(w, r) for w, r in instructions()]
    assert order.index(("RUN", _base_check())) == [w for w, _ in order].index("FROM") + 2
    base = "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:server-sagemaker-cuda-v2.5"
    digest = "sha256:" + "ab" * 32
    cases = {
        f"{base.rsplit(':', 1)[0]}@{digest}": 0,  # pinned
        f"{base}@{digest}": 0,  # tag and digest: the digest decides
        f"python@{digest}": 0,  # Docker Hub, pinned
        base: 1,  # a tag
        "library/ubuntu:24.04": 1,
        "python:3.12": 1,  # Docker Hub's short name: docker.io/library/python:3.12
        "python": 1,  # :latest
        "docker.io/library/python:3.12": 1,
        "localhost:5000/vllm:1": 1,  # a registry, even on this machine, serves tags
        "peagle-standin:3f2a": 1,  # a short name resolves to Docker Hub when absent
        "localhost/peagle-deploy-test-standin-base:3f2a": 0,  # built here (the stand-in)
    }
    for image, code in cases.items():
        done = subprocess.run(
            ["sh", "-c", _base_check()],
            env={"BASE_IMAGE": image, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == code, (image, done.stderr)
        if code:
            assert "pin it by digest" in done.stderr
    makefile = (ROOT / "Makefile").read_text()
    assert "imagetools inspect" in makefile and '@$$digest"' in makefile


def test_the_tests_stand_in_bases_are_names_of_this_machine() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        import standin_image
    finally:
        sys.path.pop(0)
    for repo in (standin_image.BASE_REPO, standin_image.VLLM_CPU_REPO):
        assert repo.startswith("localhost/"), repo


def test_the_server_runs_as_an_unprivileged_user() -> None:
    users = [rest for word, rest in instructions() if word == "USER"]
    assert users == ["10001:10001"], "the last USER is the serving user"
    order = [word for word, _ in instructions()]
    assert order.index("USER") > max(i for i, w in enumerate(order) if w == "RUN")
    runs = " ".join(rest for word, rest in instructions() if word == "RUN")
    assert "useradd --system --uid 10001" in runs
    assert "peagle:x:10001:10001:" in runs  # a passwd entry where useradd is missing
    envs = " ".join(rest for word, rest in instructions() if word == "ENV")
    assert "HOME=/home/peagle" in envs


def test_vllm_version_label_matches_the_contract_test_environment() -> None:
    version = labels()["ai.peagle.vllm-version"]
    assert version == script_vllm_version() == "0.30.0"
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(rf"^VLLM_VERSION := {re.escape(version)}$", makefile, re.M)
    # the base image carries the same release (a source build of it)
    images = json.loads((ROOT / "peagle_deploy/catalog/data/images.json").read_text())
    base_tag = labels()["ai.peagle.base-tag"].split(":", 1)[1]
    (base,) = [i for i in images["images"] if i["tag"] == base_tag]
    assert base["vllm"].split("+", 1)[0] == version


def test_no_syntax_directive_so_the_build_needs_no_registry() -> None:
    """`# syntax=...` makes BuildKit pull a frontend image from Docker Hub first."""
    for line in DOCKERFILE.read_text().splitlines():
        if not line.startswith("#"):
            break
        assert not re.match(r"#\s*syntax\s*=", line, re.I), line


def test_base_image_is_a_build_argument() -> None:
    froms = [rest for word, rest in instructions() if word == "FROM"]
    assert froms == ["${BASE_IMAGE}"]


def test_entrypoint_and_port() -> None:
    entrypoints = [rest for word, rest in instructions() if word == "ENTRYPOINT"]
    assert [json.loads(e) for e in entrypoints] == [["peagle-serve"]]
    exposed = [rest for word, rest in instructions() if word == "EXPOSE"]
    assert exposed == [str(contract.SERVING_PORT)]


def test_installs_the_stdlib_only_package_without_dependencies() -> None:
    runs = " ".join(rest for word, rest in instructions() if word == "RUN")
    assert "pip install --no-deps --no-cache-dir" in runs
    assert "source=container" in runs  # bind mount: no COPY layer of the sources
    assert not [w for w, _ in instructions() if w in {"COPY", "ADD"}]
    project = tomllib.loads((CONTAINER / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == []
    assert project["scripts"]["peagle-serve"] == "peagle_serve.entrypoint:main"
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert root["scripts"]["peagle-serve"] == project["scripts"]["peagle-serve"]


def test_dockerignore_sends_only_the_package() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    assert "!container/peagle_serve/" in lines and "!container/pyproject.toml" in lines


def test_package_imports_only_the_standard_library() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in {"peagle_serve", "__future__"}, (
                    f"{path.name} imports {name}"
                )


def test_runs_with_no_site_packages(tmp_path: Path) -> None:
    """`python -I -S`: no site-packages at all, as in a bare interpreter."""
    (tmp_path / "config.json").write_text("{}")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from peagle_serve.entrypoint import main; sys.exit(main(['--print-args']))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(CONTAINER)],
        env={"SM_VLLM_MODEL": str(tmp_path), "SM_VLLM_DTYPE": "bfloat16"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    argv = json.loads(done.stdout)
    assert argv[argv.index("--dtype") + 1] == "bfloat16"
