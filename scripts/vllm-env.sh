#!/usr/bin/env bash
# Builds (once) the CPU-only vLLM environment the container contract tests run against
# (tests/container/test_container_contract.py). Prints the venv path on stdout.
#
# Kept outside the clone, keyed by version, so CI runs on the same machine reuse it; a
# stamp file marks a finished build, so an interrupted build is redone from scratch.
# The version must equal the vLLM that the Dockerfile's base image carries (its
# `org.opencontainers.image.vllm-version` LABEL); a test checks that.
#
# Recipe (what installs on a CPU-only machine): the CPU build of torch 2.13.0 first (pip finds it through the
# machine's find-links), then vLLM, then remove torchvision / torchaudio / torchcodec:
# their native libraries do not load beside that torch and transformers imports
# torchvision when present. VLLM_TARGET_DEVICE=cpu lets vLLM import with no GPU.
set -euo pipefail
VLLM_VERSION="${VLLM_VERSION:-0.30.0}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
VENV="${PEAGLE_VLLM_VENV:-$HOME/.cache/peagle-deploy/vllm-$VLLM_VERSION}"
STAMP="$VENV/.peagle-ready"
PY="${PYTHON:-python3}"

sanity_check() {
  VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" - <<'PY' >&2
import vllm
from vllm.config import SpeculativeConfig  # noqa: F401
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

args = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", "m", "--port", "8080"])
assert args.port == 8080, args.port
print(f"vLLM {vllm.__version__} imports and parses on CPU")
PY
}

if [ -f "$STAMP" ]; then
  echo "$VENV"
  exit 0
fi
echo "building CPU-only vLLM $VLLM_VERSION environment in $VENV (about 3 minutes, 5.5 GB)" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q "torch==$TORCH_VERSION" >&2
"$VENV/bin/pip" install -q "torch==$TORCH_VERSION" "vllm==$VLLM_VERSION" >&2
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >&2 || true
sanity_check
installed="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm"))')"
if [ "$installed" != "$VLLM_VERSION" ]; then
  echo "vllm-env: installed vLLM $installed, expected $VLLM_VERSION" >&2
  exit 1
fi
touch "$STAMP"
echo "$VENV"
