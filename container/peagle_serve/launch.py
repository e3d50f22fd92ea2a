"""The command that starts vLLM: the one the AWS vLLM SageMaker image's own entrypoint runs.

aws/deep-learning-containers@dceae13291323f0985f5e90923f4b332c387af6a
`scripts/docker/vllm/sagemaker_entrypoint.sh` ends in

    exec standard-supervisor python3 -m vllm.entrypoints.openai.api_server ARGS

and, when `/usr/local/bin/sagemaker_serve.py` exists (the amzn2023 images copy it there
and put /usr/local/bin on PYTHONPATH, `docker/vllm/Dockerfile.amzn2023`), appends
`--middleware sagemaker_serve.SageMakerRouteMiddleware` (routes /invocations by the
`route=` custom attribute). `standard-supervisor` (PyPI model-hosting-container-standards)
runs vLLM under supervisord: it restarts a crashed server (PROCESS_AUTO_RECOVERY,
PROCESS_MAX_START_RETRIES) and installs /opt/ml/model/requirements.txt first.

peagle-serve keeps that behaviour: the same server module, the supervisor whenever it is
on PATH and the middleware whenever its file exists, so a base image without them (a
plain vLLM image, the tests' stand-in) still works. What peagle-serve adds around it
(preflight, signal forwarding, metrics) is in entrypoint.py.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from peagle_serve import strict_json

SERVER_COMMAND: Final = ("python3", "-m", "vllm.entrypoints.openai.api_server")
SUPERVISOR: Final = "standard-supervisor"
ROUTE_MIDDLEWARE_FILE: Final = "/usr/local/bin/sagemaker_serve.py"
ROUTE_MIDDLEWARE: Final = "sagemaker_serve.SageMakerRouteMiddleware"
# Replaces SERVER_COMMAND (a JSON list or one path); tests run a stand-in here.
SERVER_COMMAND_ENV: Final = "PEAGLE_VLLM_COMMAND"


class LaunchError(ValueError):
    """A bad value in the launch variables (one line, names the variable)."""


def server_command(env: Mapping[str, str]) -> list[str]:
    """SERVER_COMMAND, or what PEAGLE_VLLM_COMMAND says instead."""
    raw = env.get(SERVER_COMMAND_ENV, "").strip()
    if not raw:
        return list(SERVER_COMMAND)
    if not raw.startswith("["):
        return [raw]
    try:
        value = strict_json.loads(
            raw, what=SERVER_COMMAND_ENV, max_bytes=strict_json.ENV_VALUE_MAX_BYTES
        )
    except strict_json.JsonLimitError as e:
        raise LaunchError(str(e)) from None
    except strict_json.JsonSyntaxError:
        value = None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise LaunchError(f"{SERVER_COMMAND_ENV}: must be one path or a JSON list of strings")
    return value


def launch_argv(
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    which: Callable[..., str | None] = shutil.which,
    is_file: Callable[[str], bool] = os.path.isfile,
) -> list[str]:
    """The full argv that starts vLLM with the server arguments `args`."""
    argv = [*server_command(env), *args]
    if is_file(ROUTE_MIDDLEWARE_FILE):
        argv += ["--middleware", ROUTE_MIDDLEWARE]
    if which(SUPERVISOR, path=env.get("PATH")):
        argv.insert(0, SUPERVISOR)
    return argv
