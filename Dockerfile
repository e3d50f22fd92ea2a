# peagle-deploy serving image: AWS's vLLM SageMaker image plus the `peagle-serve`
# entrypoint (SM_VLLM_* -> vLLM arguments as the AWS image converts them, P-EAGLE
# preflight, acceptance metrics; vLLM then starts as the base image starts it).
#
# No `# syntax=` line on purpose: it makes BuildKit fetch a frontend image from Docker
# Hub. The builder's built-in frontend (Docker 20.10+) handles everything below, so the
# build needs no registry but the base image's (or none, with a local --build-arg
# BASE_IMAGE; tests/container/test_container_image.py builds it that way, offline).
#
# Base: AWS's vllm:server-sagemaker-cuda-v2.5 (the base-tag LABEL below), which carries
# vLLM 0.30.0 (parallel drafting since 0.16.0). The CPU-only contract tests run against
# the same version (scripts/vllm-env.sh pins it; a test keeps the LABEL below, that
# script and the Makefile in step). To move to another base, change the base-tag and
# vllm-version LABELs and VLLM_VERSION in scripts/vllm-env.sh together, then run
# scripts/platform_facts.py (the catalog reads the LABELs).
#
# The base lives in the Deep Learning Containers registry of the region you build for,
# whose account differs by region (29 of the 45 are not 763104351884; China's domain is
# amazonaws.com.cn), so BASE_IMAGE has no default: the catalog gives it (see
# docs/container.md, "Build and push"):
#   make image REGION=us-west-2
# or
#   DOCKER_BUILDKIT=1 docker build \
#     --build-arg BASE_IMAGE="$(peagle image base --region us-west-2)@sha256:<digest>" \
#     -t peagle-vllm .
# A base must be pinned by digest (`repository@sha256:...`): a tag can be moved to other
# content. `make image` reads the tag's digest and pins it. The check below refuses every
# tag, Docker Hub's short names too (`python:3.12` is docker.io/library/python:3.12),
# except names under `localhost/`: images built on this machine (the tests' stand-ins,
# `localhost/peagle-deploy-test-standin-base:3f2a`), which no remote registry serves.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG BASE_IMAGE
RUN case "${BASE_IMAGE}" in \
      *@sha256:*) ;; \
      localhost/*) ;; \
      *) echo "BASE_IMAGE ${BASE_IMAGE} is a tag; pin it by digest (make image), or build it here as localhost/NAME:TAG" >&2; exit 1 ;; \
    esac

LABEL org.opencontainers.image.title="peagle-deploy vLLM server" \
      org.opencontainers.image.description="vLLM on SageMaker with a P-EAGLE preflight and acceptance metrics" \
      org.opencontainers.image.licenses="Apache-2.0" \
      ai.peagle.base-tag="vllm:server-sagemaker-cuda-v2.5" \
      ai.peagle.vllm-version="0.30.0"

# One small layer: the stdlib-only package is built from a bind mount (no COPY layer,
# no build files left behind) with the setuptools that vLLM already depends on, so
# the build needs no network and the image's Python packages stay untouched. vLLM's
# images install into the system Python; PIP_BREAK_SYSTEM_PACKAGES lets pip do the
# same where the distribution marks it externally managed (older pips ignore it).
RUN --mount=type=bind,source=container,target=/tmp/peagle-serve,rw \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    python3 -m pip install --no-deps --no-cache-dir --no-build-isolation /tmp/peagle-serve \
 && command -v peagle-serve \
 && python3 -c "import peagle_serve.entrypoint"

# Log lines reach CloudWatch at once; the metrics reporter reads /metrics every 60 s.
ENV PYTHONUNBUFFERED=1 \
    PEAGLE_METRICS_INTERVAL_SECONDS=60

# Serve as an unprivileged user with a home of its own (vLLM's, torch's and Hugging
# Face's caches live under $HOME, and torch looks the user up by uid, so it needs a
# passwd entry). The model and drafter are read-only mounts for any user; the base
# image's supervisor writes its config and pid files under /tmp. useradd where the
# distribution has it, else the same entries written directly.
RUN (command -v useradd >/dev/null \
      && useradd --system --uid 10001 --user-group --create-home --home-dir /home/peagle \
           --shell /usr/sbin/nologin peagle) \
 || (echo 'peagle:x:10001:10001:peagle-serve:/home/peagle:/usr/sbin/nologin' >> /etc/passwd \
      && echo 'peagle:x:10001:' >> /etc/group \
      && mkdir -p /home/peagle && chown 10001:10001 /home/peagle)
ENV HOME=/home/peagle
USER 10001:10001

EXPOSE 8080
# SageMaker runs `docker run IMAGE serve`: peagle-serve takes `serve` (or nothing).
ENTRYPOINT ["peagle-serve"]
