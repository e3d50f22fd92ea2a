#!/usr/bin/env bash
# Regenerate the hashed locks:
# - requirements/deploy.lock: the exact set of packages (with the [bench] extra: the
#   promotion gates run a benchmark) the workflow's deploy jobs install
#   (`pip install --require-hashes --no-deps -r requirements/deploy.lock`, then
#   `pip install --no-deps --no-build-isolation .`). Run it after changing pyproject.toml's
#   dependencies or build requirements; tests/promote/test_promote_workflow.py fails while
#   the lock does not satisfy them.
# - infra/model_provider/requirements.lock: the botocore (and its dependencies) the model
#   provider's Lambda asset carries (infra/provider_bundle.py), from
#   infra/model_provider/requirements.in.
#
# Resolves with the Python the workflow uses (PYTHON, default python3.12) and pip-tools,
# against PyPI only (the machine's pip configuration, mirrors and find-links are ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.12}"
PIP_TOOLS_VERSION=7.6.2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/pip" install -q "pip-tools==$PIP_TOOLS_VERSION"
"$work/venv/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras \
  --no-emit-index-url --no-emit-trusted-host --no-emit-find-links \
  --extra bench --output-file requirements/deploy.lock pyproject.toml requirements/build.in
"$work/venv/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras \
  --no-emit-index-url --no-emit-trusted-host --no-emit-find-links \
  --output-file infra/model_provider/requirements.lock infra/model_provider/requirements.in
