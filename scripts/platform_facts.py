#!/usr/bin/env python3
"""Regenerate (or check) the platform facts peagle-deploy plans with, from public sources.

Writes three files under peagle_deploy/catalog/data/, every value with where it was read:

- engines.json: what each vLLM release accepts (SpeculativeConfig fields and methods,
  parallel drafting, the per-batch-size K schedule, the mask-token keys the parallel
  drafter reads, the registered model architectures, whether the fix for per-batch-size
  K with parallel drafting, vllm-project/vllm#45695, is in). Read from the vLLM wheels on
  PyPI (`pip download --no-deps vllm==X`, cached in ~/.cache/peagle-deploy/wheels), by
  parsing a few source files inside the wheel; nothing is imported or executed.
- images.json: the AWS vLLM SageMaker image tags, the vLLM and CUDA each carries, the
  regions each is published in, and the registry account and domain of every region.
  Tags, regions and accounts come from the sagemaker-core wheel on PyPI
  (sagemaker/core/image_uri_config/vllm*.json, common_utils.ALTERNATE_DOMAINS); the vLLM
  inside the `server-sagemaker-cuda-v2.x` builds, and the legacy 0.18.0 tag JumpStart
  uses, come from aws/deep-learning-containers and aws/sagemaker-python-sdk (see below).
- jumpstart.json: what JumpStart's gpt-oss-20b spec prescribes (image, environment,
  timeouts of its top-ranked config, drafter channel), from aws/sagemaker-python-sdk's
  test data.

GitHub sources are not reachable from CI or from users' machines, so their content is
recorded once, as excerpts with the repository, commit, path and the file's sha256, in
scripts/platform_sources/github_excerpts.json; the data is derived from those excerpts.
`--record-excerpts DIR...` rewrites them from local git mirrors (bare repositories);
`--verify-excerpts DIR...` proves the recorded excerpts equal the files at their commits.
A file published after the mirror's HEAD is recorded with its own commit
(`--add-excerpt REPO COMMIT PATH COPY`, from a copy of the file at that commit); it is
kept by `--record-excerpts` until the mirror's HEAD has the path, and verified at its own
commit.

Usage:
  scripts/platform_facts.py            # regenerate the data files
  scripts/platform_facts.py --check    # exit 1 when the data differs from the sources
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# The schedule field and the fix are named once, in the contract the plan and the image share.
from peagle_serve.contract import K_SCHEDULE_FIELD, PARALLEL_DRAFTING_K_FIX

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "peagle_deploy" / "catalog" / "data"
EXCERPTS = ROOT / "scripts" / "platform_sources" / "github_excerpts.json"
DOCKERFILE = ROOT / "Dockerfile"
WHEEL_CACHE = Path(
    os.environ.get("PEAGLE_WHEEL_CACHE", Path.home() / ".cache" / "peagle-deploy" / "wheels")
)

VLLM_VERSIONS = ("0.18.0", "0.27.1", "0.30.0")
"""vLLM releases whose capabilities are recorded: those the default images carry."""
SAGEMAKER_CORE_VERSION = "2.27.0"

DLC_REPO = "aws/deep-learning-containers"
DLC_SERVER_DATA = "docs/src/data/vllm-server/"
DLC_RELEASE_CONFIG = ".github/config/image/vllm/sagemaker-amzn2023.yml"
SERVER_V2_LINE = "server-sagemaker-cuda-v2"
SDK_REPO = "aws/sagemaker-python-sdk"
JUMPSTART_SPEC = "sagemaker-serve/tests/unit/servers/data/jumpstart_specs/"
JUMPSTART_MODELS = ("openai-reasoning-gpt-oss-20b",)

SPECULATIVE_PY = "vllm/config/speculative.py"
REGISTRY_PY = "vllm/model_executor/models/registry.py"
SPEC_DECODE_DIR = "vllm/v1/spec_decode/"
ENTRYPOINTS_DIR = "vllm/entrypoints/"
LOG_ARGS_FUNCTION = "log_non_default_args"


# --- wheels from PyPI ---------------------------------------------------------------------


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def fetch_wheel(dist: str, version: str, filename: str | None = None) -> Path:
    """The wheel of `dist==version` in the cache, downloaded with pip when absent."""
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    prefix = f"{dist.replace('-', '_')}-{version}-"
    if filename is not None and (WHEEL_CACHE / filename).exists():
        return WHEEL_CACHE / filename
    cached = sorted(WHEEL_CACHE.glob(prefix + "*.whl"))
    if filename is None and cached:
        return cached[-1]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
         "-d", str(WHEEL_CACHE), f"{dist}=={version}"],
        check=True,
    )  # fmt: skip
    if filename is not None:
        return WHEEL_CACHE / filename
    cached = sorted(WHEEL_CACHE.glob(prefix + "*.whl"))
    if not cached:
        raise FileNotFoundError(f"pip downloaded no wheel for {dist}=={version}")
    return cached[-1]


def wheel_source(dist: str, version: str, wheel: Path) -> dict[str, str]:
    return {"pypi": f"{dist}=={version}", "wheel": wheel.name, "sha256": _sha256(wheel)}


# --- vLLM: parsing the wheel's source files -------------------------------------------------


def _module_assignments(tree: ast.Module) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                out[target.id] = node.value
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.value is not None
        ):
            out[node.target.id] = node.value
    return out


def _literal_values(node: ast.expr, names: Mapping[str, ast.expr], seen: set[str]) -> list[str]:
    """String values of a `Literal[...]`, following names of other Literal aliases."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name):
        if node.id in seen or node.id not in names:
            return []
        return _literal_values(names[node.id], names, seen | {node.id})
    if isinstance(node, ast.Subscript):
        inner = node.slice
        items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        out: list[str] = []
        for item in items:
            out.extend(_literal_values(item, names, seen))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _literal_values(node.left, names, seen) + _literal_values(node.right, names, seen)
    return []


def _is_init_false(value: ast.expr | None) -> bool:
    if not isinstance(value, ast.Call):
        return False
    return any(
        kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False
        for kw in value.keywords
    )


def speculative_fields(source: str) -> list[str]:
    """Init fields of `SpeculativeConfig` (the keys `--speculative-config` may carry)."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "SpeculativeConfig":
            return sorted(
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and not item.target.id.startswith("_")
                and not _is_init_false(item.value)
                and "ClassVar" not in ast.unparse(item.annotation)
            )
    raise ValueError("no class SpeculativeConfig")


def speculative_methods(source: str) -> list[str]:
    """Values of the `SpeculativeMethod` Literal (aliases of other Literals resolved)."""
    tree = ast.parse(source)
    names = _module_assignments(tree)
    if "SpeculativeMethod" not in names:
        raise ValueError("no SpeculativeMethod")
    return sorted(set(_literal_values(names["SpeculativeMethod"], names, {"SpeculativeMethod"})))


def registered_architectures(source: str) -> list[str]:
    """Architecture names of the dictionaries merged into the registry's `_VLLM_MODELS`."""
    names = _module_assignments(ast.parse(source))
    merged = names.get("_VLLM_MODELS")
    if not isinstance(merged, ast.Dict):
        raise ValueError("no _VLLM_MODELS dict")
    out: set[str] = set()
    for key, value in zip(merged.keys, merged.values, strict=True):
        if key is None and isinstance(value, ast.Name):
            table = names.get(value.id)
            if not isinstance(table, ast.Dict):
                raise ValueError(f"{value.id} is not a dict literal")
            out.update(
                k.value
                for k in table.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            )
        elif isinstance(key, ast.Constant) and isinstance(key.value, str):
            out.add(key.value)
    return sorted(out)


def _config_key(test: ast.expr, aliases: Mapping[str, str]) -> str | None:
    """The drafter config key one branch of the mask-token lookup tests, or None."""
    if isinstance(test, ast.BoolOp):
        keys = [_config_key(v, aliases) for v in test.values]
        found = [k for k in keys if k]
        return found[-1] if found else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        left = test.left
        if (
            isinstance(op, ast.In)
            and isinstance(left, ast.Constant)
            and isinstance(right, ast.Name)
            and right.id in aliases
        ):
            return f"{aliases[right.id]}.{left.value}"
        if isinstance(op, ast.IsNot):
            return _config_key(left, aliases)
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id in ("hasattr", "getattr")
        and len(test.args) >= 2
    ):
        arg = test.args[1]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
    return None


def mask_token_keys(source: str) -> list[str]:
    """Drafter config keys `_init_parallel_drafting_params` reads the mask token from, in
    the order it tries them (a dotted key is a key inside a nested config section)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_init_parallel_drafting_params":
            aliases: dict[str, str] = {}
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                ):
                    key = _config_key(stmt.value, aliases)
                    if key:
                        aliases[stmt.targets[0].id] = key
                if isinstance(stmt, ast.If):
                    keys: list[str] = []
                    branch: ast.stmt | None = stmt
                    while isinstance(branch, ast.If):
                        key = _config_key(branch.test, aliases)
                        if key:
                            keys.append(key)
                        branch = branch.orelse[0] if len(branch.orelse) == 1 else None
                    if keys:
                        return keys
    raise ValueError("no _init_parallel_drafting_params with a key lookup")


def logged_args_redacted(source: str) -> list[str]:
    """The arguments `log_non_default_args` masks when `vllm serve` logs its non-default
    arguments at start (`logger.info("non-default args: %s", ...)`), e.g. `api_key`.

    Empty when it logs the dict as is. Masked means: the logged value is a call of a
    module function whose body names a module-level set of field names (vLLM 0.30.0:
    `redact_sensitive_args(...)` over `_SENSITIVE_ARG_FIELDS`).
    """
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assigned = _module_assignments(tree)
    log_fn = functions.get(LOG_ARGS_FUNCTION)
    if log_fn is None:
        raise ValueError(f"no {LOG_ARGS_FUNCTION} in this module")
    for node in ast.walk(log_fn):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "info"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith("non-default args")
        ):
            continue
        logged = node.args[1]
        if not (isinstance(logged, ast.Call) and isinstance(logged.func, ast.Name)):
            return []
        redactor = functions.get(logged.func.id)
        if redactor is None:
            return []
        fields: set[str] = set()
        for name in {n.id for n in ast.walk(redactor) if isinstance(n, ast.Name)}:
            value = assigned.get(name)
            if value is not None:
                fields.update(
                    c.value
                    for c in ast.walk(value)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                )
        return sorted(fields)
    raise ValueError(f"{LOG_ARGS_FUNCTION} logs no 'non-default args'")


def resizes_slots_at_propose(sources: Iterable[str]) -> bool:
    """Whether `extra_slots_per_request` is reassigned outside `__init__`.

    vllm-project/vllm#45695 (the fix for per-batch-size K with parallel drafting) syncs
    the parallel-drafting slot layout with the scheduled K at the start of `propose()`;
    every release before it sets `extra_slots_per_request` once, from the largest K.
    """
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.FunctionDef) or node.name == "__init__":
                continue
            for inner in ast.walk(node):
                targets = (
                    inner.targets
                    if isinstance(inner, ast.Assign)
                    else [inner.target]
                    if isinstance(inner, ast.AugAssign | ast.AnnAssign)
                    else []
                )
                for target in targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and target.attr == "extra_slots_per_request"
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        return True
    return False


def engine_from_wheel(version: str, wheel: Path) -> dict[str, Any]:
    """One entry of engines.json, read from the vLLM wheel's source files."""
    with zipfile.ZipFile(wheel) as z:
        speculative_src = z.read(SPECULATIVE_PY).decode()
        registry_src = z.read(REGISTRY_PY).decode()
        decode = {
            name: z.read(name).decode()
            for name in z.namelist()
            if name.startswith(SPEC_DECODE_DIR) and name.endswith(".py")
        }
        (log_args_path, log_args_src), *_ = [
            (name, src)
            for name in sorted(z.namelist())
            if name.startswith(ENTRYPOINTS_DIR) and name.endswith(".py")
            for src in [z.read(name).decode()]
            if f"def {LOG_ARGS_FUNCTION}(" in src
        ]
    fields = speculative_fields(speculative_src)
    proposer = next(
        (p for p, src in sorted(decode.items()) if "def _init_parallel_drafting_params" in src),
        None,
    )
    parallel = "parallel_drafting" in fields
    keys = mask_token_keys(decode[proposer]) if parallel and proposer else []
    k_schedule = K_SCHEDULE_FIELD in fields
    return {
        "vllm": version,
        "speculative_fields": fields,
        "speculative_methods": speculative_methods(speculative_src),
        "parallel_drafting": parallel,
        "k_schedule": k_schedule,
        "k_schedule_with_parallel_drafting": k_schedule
        and parallel
        and resizes_slots_at_propose(decode.values()),
        "mask_token_keys": keys,
        "architectures": registered_architectures(registry_src),
        "logged_args_redacted": logged_args_redacted(log_args_src),
        "source": {
            **wheel_source("vllm", version, wheel),
            "paths": {
                "speculative_fields": SPECULATIVE_PY,
                "speculative_methods": SPECULATIVE_PY,
                "parallel_drafting": SPECULATIVE_PY,
                "k_schedule": SPECULATIVE_PY,
                "k_schedule_with_parallel_drafting": f"{SPEC_DECODE_DIR}*.py "
                f"(extra_slots_per_request reassigned outside __init__: {PARALLEL_DRAFTING_K_FIX})",
                "mask_token_keys": proposer or "",
                "architectures": REGISTRY_PY + " (_VLLM_MODELS)",
                "logged_args_redacted": f"{log_args_path} ({LOG_ARGS_FUNCTION})",
            },
        },
    }


# --- images and regions: the sagemaker-core wheel -------------------------------------------

SAGEMAKER_VLLM_CONFIG = "sagemaker/core/image_uri_config/vllm.json"
SAGEMAKER_SERVER_CONFIG = "sagemaker/core/image_uri_config/vllm-server.json"
SAGEMAKER_DOMAINS = "sagemaker/core/common_utils.py"
SAGEMAKER_JUMPSTART_REGIONS = "sagemaker/core/jumpstart/region_config.json"
DEFAULT_DOMAIN = "amazonaws.com"


def alternate_domains(source: str) -> dict[str, str]:
    """`ALTERNATE_DOMAINS` of sagemaker-core's common_utils (regions outside amazonaws.com)."""
    value = _module_assignments(ast.parse(source)).get("ALTERNATE_DOMAINS")
    if value is None:
        raise ValueError("no ALTERNATE_DOMAINS")
    domains = ast.literal_eval(value)
    if not isinstance(domains, dict):
        raise ValueError("ALTERNATE_DOMAINS is not a dict")
    return {str(k): str(v) for k, v in domains.items()}


def _cuda(container_version: str) -> str | None:
    """`cu130-ubuntu24.04-sagemaker` -> `13.0`."""
    head = container_version.split("-", maxsplit=1)[0]
    if head.startswith("cu") and head[2:].isdigit() and len(head) >= 5:
        return f"{head[2:-1]}.{head[-1]}"
    return None


def families_without_ebs(source: str) -> list[str]:
    """The family prefixes `volume_size_supported` (sagemaker-core) says attach no EBS
    volume; the same function also refuses every family with a `d` in its name."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "volume_size_supported":
            text = ast.unparse(node)
            if "'d' not in family" not in text:
                raise ValueError("volume_size_supported no longer refuses `d` families")
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Assign)
                    and isinstance(inner.targets[0], ast.Name)
                    and inner.targets[0].id == "unsupported_families"
                ):
                    return sorted(ast.literal_eval(inner.value))
    raise ValueError("no volume_size_supported with unsupported_families")


def sagemaker_core_facts(wheel: Path) -> dict[str, Any]:
    """Image tags, regions, accounts, domains and EBS families from the sagemaker-core wheel."""
    with zipfile.ZipFile(wheel) as z:
        ubuntu = json.loads(z.read(SAGEMAKER_VLLM_CONFIG))["inference"]
        server = json.loads(z.read(SAGEMAKER_SERVER_CONFIG))
        common = z.read(SAGEMAKER_DOMAINS).decode()
        jumpstart_regions = json.loads(z.read(SAGEMAKER_JUMPSTART_REGIONS))
    domains = alternate_domains(common)
    source = wheel_source("sagemaker-core", SAGEMAKER_CORE_VERSION, wheel)
    accounts: dict[str, str] = {}
    images: list[dict[str, Any]] = []

    def regions_of(config: Mapping[str, Any], path: str) -> list[str]:
        for region, account in config["registries"].items():
            if accounts.setdefault(region, account) != account:
                raise ValueError(f"{path}: {region} has two accounts")
        return sorted(config["registries"])

    for version, config in sorted(ubuntu["versions"].items()):
        container = config["container_version"]["gpu"]
        tag = "-".join([config["tag_prefix"], "gpu", config["py_versions"][0], container])
        images.append(
            {
                "repository": config["repository"],
                "tag": tag,
                "vllm": version,
                "vllm_from": "tag",
                "cuda": _cuda(container),
                "regions": regions_of(config, SAGEMAKER_VLLM_CONFIG),
                "source": {
                    **source,
                    "path": f"{SAGEMAKER_VLLM_CONFIG} inference.versions.{version}",
                },
            }
        )
    for version, config in sorted(server["versions"].items(), key=lambda kv: kv[0]):
        tag = f"{config['tag_prefix']}-{config['container_version']['gpu']}"
        images.append(
            {
                "repository": config["repository"],
                "tag": tag,
                "vllm": None,
                "vllm_from": None,
                "cuda": None,
                "regions": regions_of(config, SAGEMAKER_SERVER_CONFIG),
                "source": {**source, "path": f"{SAGEMAKER_SERVER_CONFIG} versions.{version}"},
            }
        )
    regions = {
        region: {
            "account": account,
            "domain": domains.get(region, DEFAULT_DOMAIN),
            "source": {
                **source,
                "path": f"{SAGEMAKER_VLLM_CONFIG} / {SAGEMAKER_SERVER_CONFIG} registries; "
                f"domain: {SAGEMAKER_DOMAINS} ALTERNATE_DOMAINS",
            },
        }
        for region, account in sorted(accounts.items())
    }
    instances = {
        "families_without_ebs": families_without_ebs(common),
        "families_with_d_have_no_ebs": True,
        "source": {**source, "path": f"{SAGEMAKER_DOMAINS} volume_size_supported"},
    }
    # JumpStart's own buckets, whose owner is AWS, not the deploying account: the
    # SDK's is_jumpstart_model_uri() tests a location against exactly these names.
    buckets = {
        region: sorted({c["content_bucket"], c["gated_content_bucket"]} - {None})
        for region, c in sorted(jumpstart_regions.items())
    }
    jumpstart_buckets = {
        "regions": buckets,
        "source": {
            **source,
            "path": f"{SAGEMAKER_JUMPSTART_REGIONS} (content_bucket, gated_content_bucket)",
        },
    }
    return {
        "regions": regions,
        "images": images,
        "instances": instances,
        "jumpstart_buckets": jumpstart_buckets,
    }


# --- GitHub excerpts (recorded; see --record-excerpts) ----------------------------------------


def _jumpstart_excerpt(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a JumpStart model spec peagle-deploy uses."""
    top = [
        "model_id",
        "version",
        "default_inference_instance_type",
        "inference_enable_network_isolation",
        "huggingface_id",
        "license",
        "inference_config_rankings",
        "hosting_prepacked_artifact_key",
    ]
    kept = [
        "deploy_kwargs",
        "hosting_additional_data_sources",
        "hosting_ecr_specs",
        "inference_enable_network_isolation",
        "inference_environment_variables",
        "supported_inference_instance_types",
    ]
    components: dict[str, Any] = {}
    for name, component in spec.get("inference_config_components", {}).items():
        variants = component.get("hosting_instance_type_variants", {})
        part = {k: component[k] for k in kept if k in component}
        part["regional_aliases"] = variants.get("regional_aliases", {})
        part["variants"] = {
            family: v
            for family, v in variants.get("variants", {}).items()
            if "regional_properties" in v
        }
        components[name] = part
    return {**{k: spec[k] for k in top if k in spec}, "inference_config_components": components}


def _git(mirror: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(mirror), *args], check=True, capture_output=True).stdout


def record_excerpts(
    mirrors: Mapping[str, Path], previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Read the GitHub sources from local mirrors (bare git repositories) at their HEAD;
    files of `previous` recorded at a commit of their own are kept while HEAD lacks them."""
    out: dict[str, Any] = {}
    dlc = mirrors[DLC_REPO]
    commit = _git(dlc, "rev-parse", "HEAD").decode().strip()
    listing = _git(dlc, "ls-tree", "-r", "--name-only", "HEAD", DLC_SERVER_DATA).decode().split()
    paths = [p for p in listing if p.endswith("-gpu-sagemaker.yml")] + [DLC_RELEASE_CONFIG]
    files: dict[str, Any] = {}
    for path in paths:
        raw = _git(dlc, "show", f"{commit}:{path}")
        files[path] = {"sha256": hashlib.sha256(raw).hexdigest(), "text": raw.decode()}
    for path, file in ((previous or {}).get(DLC_REPO, {}).get("files", {})).items():
        if "commit" in file and path not in files:
            files[path] = file
    out[DLC_REPO] = {"commit": commit, "files": dict(sorted(files.items()))}
    sdk = mirrors[SDK_REPO]
    commit = _git(sdk, "rev-parse", "HEAD").decode().strip()
    files = {}
    for model_id in JUMPSTART_MODELS:
        path = f"{JUMPSTART_SPEC}{model_id}.json"
        raw = _git(sdk, "show", f"{commit}:{path}")
        files[path] = {
            "sha256": hashlib.sha256(raw).hexdigest(),
            "excerpt": _jumpstart_excerpt(json.loads(raw)),
        }
    out[SDK_REPO] = {"commit": commit, "files": files}
    return out


def add_excerpt(
    recorded: Mapping[str, Any], repo: str, commit: str, path: str, raw: bytes
) -> dict[str, Any]:
    """`recorded` plus one file of `repo` as it is at `commit` (`raw`: its bytes)."""
    if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
        raise ValueError(f"{commit!r} is not a full commit id")
    if repo != DLC_REPO or not path.startswith(DLC_SERVER_DATA):
        raise ValueError(f"only {DLC_REPO} {DLC_SERVER_DATA}*.yml files are derived from")
    out = json.loads(json.dumps(recorded))
    files = out[repo]["files"]
    files[path] = {
        "commit": commit,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "text": raw.decode(),
    }
    out[repo]["files"] = dict(sorted(files.items()))
    return dict(out)


def excerpt_commit(entry: Mapping[str, Any], file: Mapping[str, Any]) -> str:
    """The commit a recorded file was read at: its own, else its repository entry's."""
    return str(file.get("commit") or entry["commit"])


def verify_excerpts(recorded: Mapping[str, Any], mirrors: Mapping[str, Path]) -> list[str]:
    """Differences between the recorded excerpts and the mirrored files at their commits."""
    problems = []
    for repo, entry in recorded.items():
        mirror = mirrors.get(repo)
        if mirror is None:
            problems.append(f"{repo}: no mirror given")
            continue
        for path, file in entry["files"].items():
            commit = excerpt_commit(entry, file)
            try:
                raw = _git(mirror, "show", f"{commit}:{path}")
            except subprocess.CalledProcessError:
                problems.append(f"{repo} {path}: not in the mirror at {commit}")
                continue
            if hashlib.sha256(raw).hexdigest() != file["sha256"]:
                problems.append(f"{repo} {path}: sha256 differs at {commit}")
            if "text" in file and raw.decode() != file["text"]:
                problems.append(f"{repo} {path}: text differs")
            if "excerpt" in file and _jumpstart_excerpt(json.loads(raw)) != file["excerpt"]:
                problems.append(f"{repo} {path}: excerpt differs")
    return problems


def _github(repo: str, commit: str, path: str) -> dict[str, str]:
    return {"repository": repo, "commit": commit, "path": path}


def _simple_yaml(text: str) -> dict[str, Any]:
    """The flat `key: value` / `key:` + `  - item` YAML of the DLC data files."""
    import yaml

    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError("not a mapping")
    return data


def dlc_server_builds(excerpts: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """`server-sagemaker-cuda-v2.x` tag -> the vLLM and CUDA the DLC records for it."""
    entry = excerpts[DLC_REPO]
    builds: dict[str, dict[str, Any]] = {}
    for path, file in sorted(entry["files"].items()):
        commit = excerpt_commit(entry, file)
        data = _simple_yaml(file["text"])
        if path.startswith(DLC_SERVER_DATA) and data.get("platform") == "sagemaker":
            for tag in data["tags"]:
                builds[tag] = {
                    "vllm": str(data["version"]),
                    "cuda": _cuda(str(data["cuda"])),
                    "source": _github(DLC_REPO, commit, path),
                }
        elif path == DLC_RELEASE_CONFIG:
            meta, build = data["metadata"], data["build"]
            tag = (
                f"server-sagemaker-cuda-v{build['dlc_major_version']}.{build['dlc_minor_version']}"
            )
            builds.setdefault(
                tag,
                {
                    "vllm": str(meta["framework_version"]),
                    "cuda": ".".join(str(build["cuda_version"]).split(".")[:2]),
                    "source": _github(DLC_REPO, commit, path),
                },
            )
    return builds


def _env_defaults(variables: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    return {str(v["name"]): str(v["default"]) for v in variables}


def jumpstart_facts(excerpts: Mapping[str, Any]) -> dict[str, Any]:
    """jumpstart.json: per model, what its top-ranked inference config deploys with."""
    entry = excerpts[SDK_REPO]
    out: dict[str, Any] = {}
    for path, file in sorted(entry["files"].items()):
        spec = file["excerpt"]
        config_name = spec["inference_config_rankings"]["overall"]["rankings"][0]
        component = spec["inference_config_components"][config_name]
        family = spec["default_inference_instance_type"].split(".")[1]
        alias = component["variants"][family]["regional_properties"]["image_uri"].lstrip("$")
        region_uris = {r: a[alias] for r, a in component["regional_aliases"].items() if alias in a}
        tags = {uri.rsplit(":", 1)[1] for uri in region_uris.values()}
        if len(tags) != 1:
            raise ValueError(f"{path}: the image tag differs by region: {sorted(tags)}")
        drafters = component.get("hosting_additional_data_sources", {}).get(
            "speculative_decoding", []
        )
        out[spec["model_id"]] = {
            "version": spec["version"],
            "config": config_name,
            "default_instance_type": spec["default_inference_instance_type"],
            "huggingface_id": spec["huggingface_id"],
            "license": spec["license"],
            "network_isolation": component["inference_enable_network_isolation"]
            if "inference_enable_network_isolation" in component
            else spec["inference_enable_network_isolation"],
            "model_data_key": spec["hosting_prepacked_artifact_key"],
            "image_repository": next(iter(region_uris.values())).split("/", 1)[1].split(":")[0],
            "image_tag": tags.pop(),
            "image_vllm": str(component["hosting_ecr_specs"]["framework_version"]),
            "image_regions": {
                region: uri.split(".", 1)[0] for region, uri in sorted(region_uris.items())
            },
            "image_domains": {
                region: uri.split("/", 1)[0].split(f".{region}.", 1)[1]
                for region, uri in sorted(region_uris.items())
            },
            "environment": _env_defaults(component["inference_environment_variables"]),
            "model_data_download_timeout_s": component["deploy_kwargs"][
                "model_data_download_timeout"
            ],
            "container_startup_health_check_timeout_s": component["deploy_kwargs"][
                "container_startup_health_check_timeout"
            ],
            "drafter": {"channel": drafters[0]["channel_name"], **drafters[0]["s3_data_source"]}
            if drafters
            else None,
            "source": _github(SDK_REPO, entry["commit"], path),
        }
    return out


# --- the project's own image ---------------------------------------------------------------


def own_image() -> dict[str, Any]:
    """The image the repository's Dockerfile builds: its base tag and vLLM label."""
    base_tag = vllm = None
    for line in DOCKERFILE.read_text().splitlines():
        text = line.strip().rstrip("\\").strip()
        if text.startswith("ai.peagle.base-tag="):
            base_tag = text.split("=", 1)[1].strip('"').split(":", 1)[1]
        if text.startswith("ai.peagle.vllm-version="):
            vllm = text.split("=", 1)[1].strip('"')
    if base_tag is None or vllm is None:
        raise ValueError("Dockerfile: no ai.peagle.base-tag / ai.peagle.vllm-version LABEL")
    return {
        "repository": "peagle-vllm",
        "base_tag": base_tag,
        "vllm": vllm,
        "source": {"path": "Dockerfile (this repository): LABEL ai.peagle.vllm-version"},
    }


# --- putting it together --------------------------------------------------------------------


def build_images(core: Mapping[str, Any], excerpts: Mapping[str, Any]) -> dict[str, Any]:
    builds = dlc_server_builds(excerpts)
    jumpstart = jumpstart_facts(excerpts)
    images = [dict(i) for i in core["images"]]
    for image in images:
        build = builds.get(image["tag"])
        if build is not None:
            image.update(vllm=build["vllm"], vllm_from="build", cuda=build["cuda"])
            image["vllm_source"] = build["source"]
    line_cuda = {b["cuda"] for t, b in builds.items() if t.startswith(SERVER_V2_LINE)}
    for image in images:
        if (
            image["tag"].startswith(SERVER_V2_LINE)
            and image["cuda"] is None
            and len(line_cuda) == 1
        ):
            # not recorded for this build; every recorded build of the v2 line is CUDA 13
            image.update(cuda=next(iter(line_cuda)), cuda_from="line")
    known = {i["tag"] for i in images}
    for model_id, facts in jumpstart.items():
        if facts["image_tag"] in known:
            continue
        for region, account in facts["image_regions"].items():
            recorded = core["regions"].get(region, {}).get("account")
            if recorded is not None and recorded != account:
                raise ValueError(f"{model_id}: {region} account {account} != {recorded}")
        tag = facts["image_tag"]
        images.append(
            {
                "repository": facts["image_repository"],
                "tag": tag,
                "vllm": facts["image_vllm"],
                "vllm_from": "tag",
                "cuda": _cuda(tag.split("-gpu-py312-")[1]) if "-gpu-py312-" in tag else None,
                "regions": sorted(facts["image_regions"]),
                "source": {
                    **facts["source"],
                    "path": facts["source"]["path"] + " (regional_aliases)",
                },
            }
        )
    return {
        "regions": dict(core["regions"]),
        "images": sorted(images, key=lambda i: i["tag"]),
        "own_image": own_image(),
    }


def generate(excerpts: Mapping[str, Any]) -> dict[str, Any]:
    """Every data file's content, by file name."""
    engines = {v: engine_from_wheel(v, fetch_wheel("vllm", v)) for v in VLLM_VERSIONS}
    core = sagemaker_core_facts(fetch_wheel("sagemaker-core", SAGEMAKER_CORE_VERSION))
    return {
        "engines.json": {"engines": engines},
        "images.json": build_images(core, excerpts),
        "instances.json": core["instances"],
        "jumpstart.json": {
            "models": jumpstart_facts(excerpts),
            "buckets": core["jumpstart_buckets"],
        },
    }


DOCS = ROOT / "docs" / "platform-facts.md"


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def doc_tables(files: Mapping[str, Any]) -> dict[str, str]:
    """The tables of docs/platform-facts.md, from the data (and the catalog's values)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "container"))
    from peagle_deploy.catalog import INSTANCE_TYPES, MODELS
    from peagle_deploy.catalog.facts import cite

    rows = [
        "| vLLM | parallel_drafting | per-batch-size K field | K schedule with parallel "
        "drafting (vllm#45695) | mask-token keys read | Gemma4ForConditionalGeneration | "
        "GptOssForCausalLM | Qwen3MoeForCausalLM | masked in the start-up `non-default args` "
        "log | source |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for version, e in files["engines.json"]["engines"].items():
        arch = set(e["architectures"])
        keys = ", ".join(f"`{k}`" for k in e["mask_token_keys"])
        rows.append(
            f"| {version} | {_yes(e['parallel_drafting'])} | {_yes(e['k_schedule'])} | "
            f"{_yes(e['k_schedule_with_parallel_drafting'])} | {keys} | "
            f"{_yes('Gemma4ForConditionalGeneration' in arch)} | "
            f"{_yes('GptOssForCausalLM' in arch)} | {_yes('Qwen3MoeForCausalLM' in arch)} | "
            f"{', '.join(f'`{k}`' for k in e['logged_args_redacted']) or 'nothing'} | "
            f"PyPI `vllm=={version}` (`{e['source']['wheel']}`, sha256 "
            f"`{e['source']['sha256'][:12]}...`) |"
        )
    engines = "\n".join(rows)
    rows = ["| tag (repository `vllm`) | vLLM | CUDA | regions | source |", "|---|---|---|---|---|"]
    for image in files["images.json"]["images"]:
        source = cite(image["source"])
        if image.get("vllm_source"):
            source += f"; vLLM: {cite(image['vllm_source'])}"
        cuda = image["cuda"] or "?"
        if image.get("cuda_from") == "line":
            cuda += " (v2 line)"
        rows.append(
            f"| `{image['tag']}` | {image['vllm'] or 'not in the sources'} | {cuda} | "
            f"{len(image['regions'])} | {source} |"
        )
    images = "\n".join(rows)
    rows = ["| model | field | value | verified | source |", "|---|---|---|---|---|"]
    for model in MODELS.values():
        for name, v in model.sourced_fields().items():
            value = v.value
            if isinstance(value, dict):
                value = ", ".join(f"{k}={x}" for k, x in value.items()) or "-"
            verified = "yes" if v.verified else "no (`*`)"
            rows.append(f"| {model.key} | {name} | `{value}` | {verified} | {v.source} |")
    models = "\n".join(rows)
    rows = ["| instance | field | value | verified | source |", "|---|---|---|---|---|"]
    for instance in INSTANCE_TYPES.values():
        for name in ("gpu_count", "gpu_memory_gb", "ebs_volume", "host_memory_gib"):
            v = getattr(instance, name)
            verified = "yes" if v.verified else "no (`*`)"
            rows.append(f"| {instance.name} | {name} | `{v.value}` | {verified} | {v.source} |")
    return {"engines": engines, "images": images, "models": models, "instances": "\n".join(rows)}


def with_doc_tables(text: str, tables: Mapping[str, str]) -> str:
    """`text` with each `<!-- facts:NAME -->...<!-- /facts:NAME -->` block replaced."""
    for name, table in tables.items():
        start, end = f"<!-- facts:{name} -->", f"<!-- /facts:{name} -->"
        head, found, rest = text.partition(start)
        if not found:
            raise ValueError(f"{DOCS.name}: no {start} marker")
        _, found, tail = rest.partition(end)
        if not found:
            raise ValueError(f"{DOCS.name}: no {end} marker")
        text = f"{head}{start}\n{table}\n{end}{tail}"
    return text


def dumps(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare; write nothing")
    parser.add_argument(
        "--record-excerpts",
        nargs=2,
        metavar=("DLC_MIRROR", "SDK_MIRROR"),
        help="re-record the GitHub excerpts from git mirrors of the two repositories",
    )
    parser.add_argument(
        "--add-excerpt",
        nargs=4,
        metavar=("REPO", "COMMIT", "PATH", "COPY"),
        help="record one file of REPO at COMMIT (COPY: the file's bytes at that commit)",
    )
    parser.add_argument(
        "--verify-excerpts",
        nargs=2,
        metavar=("DLC_MIRROR", "SDK_MIRROR"),
        help="check the recorded excerpts against git mirrors at their recorded commits",
    )
    args = parser.parse_args(argv)
    if args.verify_excerpts:
        mirrors = dict(zip((DLC_REPO, SDK_REPO), map(Path, args.verify_excerpts), strict=True))
        problems = verify_excerpts(json.loads(EXCERPTS.read_text()), mirrors)
        for problem in problems:
            print(problem, file=sys.stderr)
        print("excerpts match their commits" if not problems else "excerpts differ")
        return 1 if problems else 0
    if args.record_excerpts:
        mirrors = dict(zip((DLC_REPO, SDK_REPO), map(Path, args.record_excerpts), strict=True))
        previous = json.loads(EXCERPTS.read_text()) if EXCERPTS.exists() else None
        EXCERPTS.parent.mkdir(parents=True, exist_ok=True)
        EXCERPTS.write_text(dumps(record_excerpts(mirrors, previous)))
    if args.add_excerpt:
        repo, commit, path, copy = args.add_excerpt
        recorded = json.loads(EXCERPTS.read_text())
        raw = Path(copy).read_bytes()
        EXCERPTS.write_text(dumps(add_excerpt(recorded, repo, commit, path, raw)))
    files = generate(json.loads(EXCERPTS.read_text()))
    stale = [
        n
        for n, d in files.items()
        if not (DATA_DIR / n).exists() or (DATA_DIR / n).read_text() != dumps(d)
    ]
    docs = with_doc_tables(DOCS.read_text(), doc_tables(files))
    if args.check:
        for name in stale:
            print(f"{DATA_DIR / name} differs from its sources", file=sys.stderr)
        if docs != DOCS.read_text():
            print(f"{DOCS} tables differ from the data", file=sys.stderr)
        return 1 if stale or docs != DOCS.read_text() else 0
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (DATA_DIR / name).write_text(dumps(data))
    DOCS.write_text(with_doc_tables(DOCS.read_text(), doc_tables(files)))
    print(f"wrote {', '.join(files)} in {DATA_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
