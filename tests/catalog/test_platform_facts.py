"""The platform facts (catalog/data/*.json) equal what scripts/platform_facts.py derives.

What this proves:
- PyPI-derived values (vLLM capabilities, image tags, regions, registry accounts and
  domains, EBS families): the script re-reads the exact wheels the data names (sha256
  checked) and must produce the same values. Needs PyPI (pip download, cached in
  ~/.cache/peagle-deploy/wheels: 3 vLLM wheels of ~300-430 MB and sagemaker-core,
  downloaded once); never skipped under CI=true.
- GitHub-derived values (the vLLM of the `server-sagemaker-cuda-v2.x` builds, the legacy
  0.18.0 tag's regions, JumpStart's gpt-oss-20b config): the script's parsing of the
  recorded excerpts (repository + commit + path + sha256 in
  scripts/platform_sources/github_excerpts.json) must give the data. That the excerpts
  equal the files at those commits is proven by `--verify-excerpts` against a checkout;
  CI has none, so CI proves the derivation, not the excerpts' fidelity.
- The parsers themselves on small sources, including the case each one must detect.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "peagle_deploy" / "catalog" / "data"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "platform_facts", ROOT / "scripts/platform_facts.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["platform_facts"] = module
    spec.loader.exec_module(module)
    return module


pf = _script()


def _data(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def _excerpts() -> dict[str, Any]:
    return json.loads(pf.EXCERPTS.read_text())


def test_github_derived_values_follow_from_the_recorded_excerpts() -> None:
    excerpts = _excerpts()
    assert _data("jumpstart.json")["models"] == pf.jumpstart_facts(excerpts)
    builds = pf.dlc_server_builds(excerpts)
    images = {i["tag"]: i for i in _data("images.json")["images"]}
    for tag, build in builds.items():
        if tag in images:
            assert images[tag]["vllm"] == build["vllm"] and images[tag]["cuda"] == build["cuda"]
    assert builds["server-sagemaker-cuda-v2.4"]["vllm"] == "0.27.1"
    for tag in ("server-sagemaker-cuda-v2.5", "server-sagemaker-cuda-v2.6"):
        assert builds[tag]["vllm"] == "0.30.0+amzn2023.ec4a3a53" and builds[tag]["cuda"] == "13.0"
        assert images[tag]["vllm_source"] == builds[tag]["source"]
        # read at a commit of its own, newer than the DLC entry's
        assert builds[tag]["source"]["commit"] != excerpts[pf.DLC_REPO]["commit"]
    legacy = images["0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker"]
    js = pf.jumpstart_facts(excerpts)["openai-reasoning-gpt-oss-20b"]
    assert legacy["regions"] == sorted(js["image_regions"])
    for entry in excerpts.values():
        assert len(entry["commit"]) == 40
        for file in entry["files"].values():
            assert len(file["sha256"]) == 64
            assert len(pf.excerpt_commit(entry, file)) == 40
            if "text" in file:
                assert pf.hashlib.sha256(file["text"].encode()).hexdigest() == file["sha256"]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_a_file_newer_than_the_mirror_is_recorded_kept_and_verified_at_its_commit(
    tmp_path: Path,
) -> None:
    """`--add-excerpt` records a file at its own commit; `--record-excerpts` keeps it while
    the mirror's HEAD lacks the path; `--verify-excerpts` checks it at that commit (and
    says so when the mirror does not have the commit)."""
    dlc, sdk = tmp_path / "dlc", tmp_path / "sdk"
    old_yaml = 'platform: sagemaker\nversion: "0.27.0+amzn2023.x"\ncuda: cu130\ntags:\n  - "t1"\n'
    new_yaml = old_yaml.replace("0.27.0", "0.30.0").replace('"t1"', '"t2"')
    new_path = pf.DLC_SERVER_DATA + "0.30.0-gpu-sagemaker.yml"
    for repo in (dlc, sdk):
        _git(tmp_path, "init", "-q", str(repo))
    (dlc / pf.DLC_SERVER_DATA).mkdir(parents=True)
    (dlc / pf.DLC_SERVER_DATA / "0.27.0-gpu-sagemaker.yml").write_text(old_yaml)
    release = dlc / pf.DLC_RELEASE_CONFIG
    release.parent.mkdir(parents=True)
    release.write_text(
        "metadata: {framework_version: 0.27.1}\n"
        "build: {dlc_major_version: 2, dlc_minor_version: 4, cuda_version: 13.0.2}\n"
    )
    _git(dlc, "add", ".")
    _git(dlc, "commit", "-qm", "old")
    spec_path = Path(pf.JUMPSTART_SPEC) / f"{pf.JUMPSTART_MODELS[0]}.json"
    (sdk / spec_path).parent.mkdir(parents=True)
    (sdk / spec_path).write_text('{"model_id": "m", "version": "1"}')
    _git(sdk, "add", ".")
    _git(sdk, "commit", "-qm", "spec")
    mirrors = {pf.DLC_REPO: dlc, pf.SDK_REPO: sdk}
    recorded = pf.record_excerpts(mirrors)
    # the newer file exists only at a commit the mirror's HEAD does not reach
    (dlc / new_path).write_text(new_yaml)
    _git(dlc, "checkout", "-qb", "later")
    _git(dlc, "add", ".")
    _git(dlc, "commit", "-qm", "new")
    later = _git(dlc, "rev-parse", "HEAD")
    _git(dlc, "checkout", "-q", "-")
    with pytest.raises(ValueError, match="full commit"):
        pf.add_excerpt(recorded, pf.DLC_REPO, later[:12], new_path, new_yaml.encode())
    added = pf.add_excerpt(recorded, pf.DLC_REPO, later, new_path, new_yaml.encode())
    assert pf.dlc_server_builds(added)["t2"]["source"]["commit"] == later
    assert pf.dlc_server_builds(added)["t1"]["source"]["commit"] != later
    assert pf.verify_excerpts(added, mirrors) == []
    again = pf.record_excerpts(mirrors, added)  # HEAD still lacks the file: kept
    assert again[pf.DLC_REPO]["files"][new_path]["commit"] == later
    tampered = pf.add_excerpt(recorded, pf.DLC_REPO, later, new_path, b"tags: [t3]\n")
    assert pf.verify_excerpts(tampered, mirrors) == [
        f"{pf.DLC_REPO} {new_path}: sha256 differs at {later}",
        f"{pf.DLC_REPO} {new_path}: text differs",
    ]
    elsewhere = pf.add_excerpt(recorded, pf.DLC_REPO, "f" * 40, new_path, new_yaml.encode())
    assert pf.verify_excerpts(elsewhere, mirrors) == [
        f"{pf.DLC_REPO} {new_path}: not in the mirror at {'f' * 40}"
    ]


def test_every_value_names_its_source() -> None:
    for version, engine in _data("engines.json")["engines"].items():
        source = engine["source"]
        assert source["pypi"] == f"vllm=={version}" and len(source["sha256"]) == 64
        assert set(source["paths"]) >= {"speculative_fields", "mask_token_keys", "architectures"}
    images = _data("images.json")
    for image in images["images"]:
        assert image["source"].get("pypi") or image["source"].get("repository"), image["tag"]
    for region in images["regions"].values():
        assert region["source"]["pypi"].startswith("sagemaker-core==")


@pytest.mark.slow
def test_pypi_derived_values_match_the_wheels() -> None:
    try:
        for version, engine in _data("engines.json")["engines"].items():
            pf.fetch_wheel("vllm", version, engine["source"]["wheel"])
        pf.fetch_wheel("sagemaker-core", pf.SAGEMAKER_CORE_VERSION)
    except (subprocess.CalledProcessError, OSError) as e:
        if os.environ.get("CI", "").lower() == "true":
            raise
        pytest.skip(f"PyPI not reachable for the wheels: {e}")
    files = pf.generate(_excerpts())
    for name, data in files.items():
        assert pf.dumps(data) == (DATA / name).read_text(), f"{name} differs from its sources"
    for version, engine in files["engines.json"]["engines"].items():
        wheel = pf.fetch_wheel("vllm", version, engine["source"]["wheel"])
        assert pf._sha256(wheel) == _data("engines.json")["engines"][version]["source"]["sha256"]


def test_capability_parsers_on_small_sources() -> None:
    speculative_src = """
from typing import Literal
MTP = Literal["mtp"]
EagleModelTypes = Literal["eagle", "eagle3", MTP]
SpeculativeMethod = Literal["ngram", EagleModelTypes]
class SpeculativeConfig:
    num_speculative_tokens: int = None
    parallel_drafting: bool = False
    target_model_config: object = field(default=None, init=False)
    _private: int = 0
"""
    assert pf.speculative_fields(speculative_src) == ["num_speculative_tokens", "parallel_drafting"]
    assert pf.speculative_methods(speculative_src) == ["eagle", "eagle3", "mtp", "ngram"]
    registry_src = """
_TEXT = {"GptOssForCausalLM": ("gpt_oss", "X")}
_MM = {"Gemma4ForConditionalGeneration": ("gemma4", "Y")}
_VLLM_MODELS = {**_TEXT, **_MM}
"""
    assert pf.registered_architectures(registry_src) == [
        "Gemma4ForConditionalGeneration",
        "GptOssForCausalLM",
    ]
    proposer = """
class P:
    def _init_parallel_drafting_params(self):
        cfg = self.draft_model_config.hf_config
        dflash_config = getattr(cfg, "dflash_config", None)
        if dflash_config and "mask_token_id" in dflash_config:
            self.t = 1
        elif getattr(cfg, "mask_token_id", None) is not None:
            self.t = 2
        elif hasattr(cfg, "ptd_token_id"):
            self.t = 3
        else:
            raise ValueError("none")
"""
    assert pf.mask_token_keys(proposer) == [
        "dflash_config.mask_token_id",
        "mask_token_id",
        "ptd_token_id",
    ]


def test_the_fix_detection_can_see_the_fix() -> None:
    """vllm#45695 resizes the slots at propose(); releases set them once in __init__."""
    released = """
class P:
    def __init__(self):
        self.extra_slots_per_request = self.k
    def propose(self, k):
        return k
"""
    fixed = released.replace("return k", "self.extra_slots_per_request = k\n        return k")
    assert pf.resizes_slots_at_propose([released]) is False
    assert pf.resizes_slots_at_propose([fixed]) is True


def test_the_start_up_log_parser_sees_what_is_masked() -> None:
    """vLLM logs `non-default args: {...}` when `vllm serve` starts; 0.30.0 passes the
    dict through a redactor over a set of field names, earlier releases log it as is."""
    clear = """
def log_non_default_args(args):
    non_default_args = get_non_default_args(args)
    logger.info("non-default args: %s", non_default_args)
"""
    masked = """
_SENSITIVE_ARG_FIELDS = frozenset({"api_key", "hf_token"})

def redact(args):
    return {k: ("***" if k in _SENSITIVE_ARG_FIELDS else v) for k, v in args.items()}

def log_non_default_args(args):
    non_default_args = get_non_default_args(args)
    logger.info("non-default args: %s", redact(non_default_args))
"""
    assert pf.logged_args_redacted(clear) == []
    assert pf.logged_args_redacted(masked) == ["api_key", "hf_token"]
    with pytest.raises(ValueError):
        pf.logged_args_redacted("def other(): pass")


def test_cuda_and_ebs_parsers() -> None:
    assert pf._cuda("cu130-ubuntu24.04-sagemaker") == "13.0"
    assert pf._cuda("cu129") == "12.9"
    common = """
ALTERNATE_DOMAINS = {"cn-north-1": "amazonaws.com.cn"}
def volume_size_supported(instance_type):
    family = instance_type
    unsupported_families = ["g7e", "p6-b200"]
    return "d" not in family and not any(family.startswith(p) for p in unsupported_families)
"""
    assert pf.alternate_domains(common) == {"cn-north-1": "amazonaws.com.cn"}
    assert pf.families_without_ebs(common) == ["g7e", "p6-b200"]


def test_the_docs_tables_are_the_data() -> None:
    """docs/platform-facts.md shows exactly what the data files and the catalog hold."""
    files = {name: _data(name) for name in ("engines.json", "images.json")}
    text = pf.DOCS.read_text()
    assert pf.with_doc_tables(text, pf.doc_tables(files)) == text


def test_jumpstart_buckets_are_the_sdks_own_list() -> None:
    """The buckets whose owner is AWS (the bucket-owner rule's exception) are the ones the
    SageMaker SDK recognises as JumpStart's, in every region it lists."""
    from peagle_deploy.catalog.buckets import is_jumpstart_bucket, jumpstart_buckets

    buckets = jumpstart_buckets()
    assert len(buckets) >= 80
    assert is_jumpstart_bucket("jumpstart-cache-prod-us-east-1")
    assert is_jumpstart_bucket("jumpstart-private-cache-prod-eu-west-1")
    assert not is_jumpstart_bucket("jumpstart-cache-prod-us-east-1-mine")
    assert not is_jumpstart_bucket("acme-models")
