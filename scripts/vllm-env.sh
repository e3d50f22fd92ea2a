#!/usr/bin/env bash
# Builds (once) the CPU-only vLLM environment the contract tests run against.
# Kept outside the clone, keyed by version, so CI runs on the same machine reuse it.
# Recipe: FACTS.md 2 (vLLM installs CPU-only beside torch 2.13.0+cpu once the
# torchvision/torchaudio/torchcodec native libraries are removed).
set -euo pipefail
VLLM_VERSION="${VLLM_VERSION:-0.30.0}"
VENV="${PEAGLE_VLLM_VENV:-$HOME/.cache/peagle-deploy/vllm-$VLLM_VERSION}"
STAMP="$VENV/.peagle-ready"
if [ -f "$STAMP" ]; then
  echo "$VENV"
  exit 0
fi
echo "building CPU-only vLLM $VLLM_VERSION environment in $VENV (about 3 minutes)" >&2
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "torch==2.13.0" "vllm==$VLLM_VERSION" >&2
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >&2 || true
VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" -c \
  "from vllm.config import SpeculativeConfig; import vllm.entrypoints.utils" >&2
touch "$STAMP"
echo "$VENV"
