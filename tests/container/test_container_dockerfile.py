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


def build_args() -> dict[str, str]:
    """Default values of the ARGs declared before FROM, with ${VAR} substituted (an ARG
    without a default stays `${NAME}`)."""
    values: dict[str, str] = {}
    for word, rest in instructions():
        if word == "FROM":
            break
        if word == "ARG":
            name, _, default = rest.partition("=")
            values[name] = re.sub(
                r"\$\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), default
            )
            if not default:
                values[name] = "${" + name + "}"
    return values


def resolved_base_image() -> str:
    froms = [rest for word, rest in instructions() if word == "FROM"]
    assert len(froms) == 1, "one stage: the AWS vLLM image plus peagle-serve"
    return re.sub(r"\$\{(\w+)\}", lambda m: build_args()[m.group(1)], froms[0])


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


def test_base_image_is_the_pinned_aws_vllm_sagemaker_image() -> None:
    image = resolved_base_image()
    assert re.fullmatch(
        r"763104351884\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com/vllm:server-sagemaker-cuda-v\d+\.\d+"
        r"@\$\{BASE_DIGEST\}",
        image,
    ), image
    assert image.endswith(":server-sagemaker-cuda-v2.5@${BASE_DIGEST}")
    assert build_args()["AWS_REGION"], "the region is a build argument"


def test_the_base_is_pinned_by_a_digest_the_build_must_be_given() -> None:
    """A tag can be moved to other content; the default base names its digest, which has
    no default, so a build without `--build-arg BASE_DIGEST=sha256:...` fails instead of
    taking whatever the tag points at today."""
    args = [rest for word, rest in instructions() if word == "ARG"]
    assert "BASE_DIGEST" in args  # declared, no default
    assert build_args()["BASE_IMAGE"].endswith("@${BASE_DIGEST}")
    docs = (ROOT / "docs" / "container.md").read_text()
    assert "BASE_DIGEST" in docs and "imagetools inspect" in docs


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
    tag = resolved_base_image().split("@")[0].split(":")[-1]
    assert labels()["ai.peagle.base-tag"] == "vllm:" + tag


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
