"""The launch command: what the AWS image's own entrypoint runs, adapted to what the base
image has (aws/deep-learning-containers@dceae13 scripts/docker/vllm/sagemaker_entrypoint.sh)."""

from __future__ import annotations

import json

import pytest
from peagle_serve.launch import (
    ROUTE_MIDDLEWARE,
    ROUTE_MIDDLEWARE_FILE,
    SERVER_COMMAND,
    SERVER_COMMAND_ENV,
    SUPERVISOR,
    LaunchError,
    launch_argv,
    server_command,
)

ARGS = ["--port", "8080", "--model", "/opt/ml/model"]


def run(env: dict[str, str] | None = None, *, supervisor: bool, middleware: bool) -> list[str]:
    seen: list[str] = []

    def which(name: str, path: str | None = None) -> str | None:
        seen.append(name)
        return f"/opt/venv/bin/{name}" if supervisor else None

    def is_file(path: str) -> bool:
        seen.append(path)
        return middleware

    argv = launch_argv(ARGS, env or {}, which=which, is_file=is_file)
    assert seen == [ROUTE_MIDDLEWARE_FILE, SUPERVISOR]
    return argv


def test_the_aws_image_command() -> None:
    """Both present (the amzn2023 server images): the exact AWS command line."""
    assert run(supervisor=True, middleware=True) == [
        "standard-supervisor",
        "python3",
        "-m",
        "vllm.entrypoints.openai.api_server",
        *ARGS,
        "--middleware",
        "sagemaker_serve.SageMakerRouteMiddleware",
    ]


def test_a_plain_vllm_image_gets_the_server_module_alone() -> None:
    assert run(supervisor=False, middleware=False) == [*SERVER_COMMAND, *ARGS]


def test_middleware_without_supervisor_and_the_reverse() -> None:
    assert run(supervisor=False, middleware=True) == [
        *SERVER_COMMAND,
        *ARGS,
        "--middleware",
        ROUTE_MIDDLEWARE,
    ]
    assert run(supervisor=True, middleware=False)[:2] == [SUPERVISOR, "python3"]


def test_the_supervisor_is_looked_up_on_the_containers_path() -> None:
    paths: list[str | None] = []

    def which(name: str, path: str | None = None) -> str | None:
        paths.append(path)
        return None

    launch_argv(ARGS, {"PATH": "/opt/venv/bin:/usr/bin"}, which=which, is_file=lambda _p: False)
    assert paths == ["/opt/venv/bin:/usr/bin"]


def test_server_command_override() -> None:
    assert server_command({}) == list(SERVER_COMMAND)
    assert server_command({SERVER_COMMAND_ENV: "/usr/bin/fake"}) == ["/usr/bin/fake"]
    assert server_command({SERVER_COMMAND_ENV: json.dumps(["py", "x.py"])}) == ["py", "x.py"]
    wrapped = run({SERVER_COMMAND_ENV: "/usr/bin/fake"}, supervisor=True, middleware=False)
    assert wrapped == [SUPERVISOR, "/usr/bin/fake", *ARGS]


@pytest.mark.parametrize(
    "raw", ["[1, 2]", "[]", "[not json", '["a", 3]', "[" * 1000 + "]" * 1000, '["a", NaN]']
)
def test_bad_server_command_override_is_refused(raw: str) -> None:
    with pytest.raises(LaunchError, match=SERVER_COMMAND_ENV):
        server_command({SERVER_COMMAND_ENV: raw})
