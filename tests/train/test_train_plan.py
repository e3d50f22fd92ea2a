"""build_training_plan: the CreateTrainingJob request botocore accepts, and every refusal."""

from __future__ import annotations

import copy
import json
import re
import typing
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.validate import validate_parameters
from peagle_train import contract

from peagle_deploy.errors import InputError
from peagle_deploy.stage_training import default_job_prefix
from peagle_deploy.train.plan import build_training_plan, plan_document
from peagle_deploy.train.spec import (
    DataFormat,
    ServingFormat,
    is_training_spec,
    load_training_spec,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train-qwen3-8b.yaml"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-train@sha256:" + "ab" * 32
KEY = "arn:aws:kms:us-east-1:123456789012:key/0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
QWEN3_8B = {  # the published shape of Qwen3-8B's config.json
    "model_type": "qwen3",
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "intermediate_size": 12288,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
}
STATED = ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")
QWEN3_ADDED = {"151643": "<|endoftext|>", "151645": "<|im_end|>", "151668": "</think>"}


@pytest.fixture(scope="module")
def create_training_job() -> Any:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return model.operation_model("CreateTrainingJob").input_shape


def _valid(shape: Any, request: dict[str, Any]) -> None:
    validate_parameters(request, shape)
    # ParamValidator checks types, required members and ranges; the name and URIs'
    # patterns (botocore's `pattern`) are checked here.
    assert re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", request["TrainingJobName"])
    for uri in _s3_uris(request):
        assert re.fullmatch(r"(https|s3)://([^/]+)/?(.*)", uri) and len(uri) <= 1024


def _s3_uris(request: dict[str, Any]) -> list[str]:
    uris = [c["DataSource"]["S3DataSource"]["S3Uri"] for c in request["InputDataConfig"]]
    return [
        *uris,
        request["OutputDataConfig"]["S3OutputPath"],
        request["CheckpointConfig"]["S3Uri"],
    ]


def _target_dir(
    where: Path,
    config: dict[str, Any] | None = None,
    added: dict[str, str] | None = None,
    *,
    template: bool = True,
    mask: str | None = None,
) -> Path:
    folder = where / "target"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config or QWEN3_8B))
    tokenizer: dict[str, Any] = {
        "added_tokens_decoder": {
            k: {"content": v, "special": True} for k, v in (added or QWEN3_ADDED).items()
        }
    }
    if mask is not None:
        tokenizer["mask_token"] = mask
    if template:
        tokenizer["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return folder


def _default_target(where: Path) -> Path:
    """The Qwen3-8B-class folder, unless the test wrote its own."""
    folder = where / "target"
    return folder if folder.exists() else _target_dir(where)


def _spec(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    """A Qwen3-8B-class training spec on one GPU instance; `changes` as dotted paths."""
    body: dict[str, Any] = {
        "name": "support-drafter",
        "region": "us-east-1",
        "role_arn": "arn:aws:iam::123456789012:role/peagle-training-dev",
        "image_uri": IMAGE,
        "target": {
            "model_data_uri": "s3://models-bucket/qwen3-8b/",
            "config_dir": str(_default_target(tmp_path)),
        },
        "data": {"data_uri": "s3://data-bucket/chats/"},
        "instance_type": "ml.g7e.2xlarge",
        "output_uri": "s3://drafters-bucket/peagle/",
        "kms_key_arn": KEY,
    }
    for path, value in changes.items():
        node = body
        *parents, leaf = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return {"train": body}


def _plan(tmp_path: Path, **changes: Any) -> Any:
    return build_training_plan(load_training_spec(_spec(tmp_path, **changes)))


def test_a_qwen3_8b_class_job_on_one_gpu(tmp_path: Path, create_training_job: Any) -> None:
    plan = _plan(tmp_path)
    request = plan.request
    _valid(create_training_job, request)
    assert request["AlgorithmSpecification"] == {
        "TrainingImage": IMAGE,
        "TrainingInputMode": "File",
    }
    channels = {
        c["ChannelName"]: c["DataSource"]["S3DataSource"] for c in request["InputDataConfig"]
    }
    assert list(channels) == [contract.TARGET_CHANNEL, contract.DATA_CHANNEL]
    assert channels["target"]["S3Uri"] == "s3://models-bucket/qwen3-8b/"
    assert {c["S3DataType"] for c in channels.values()} == {"S3Prefix"}
    assert {c["S3DataDistributionType"] for c in channels.values()} == {"FullyReplicated"}
    assert request["OutputDataConfig"] == {
        "S3OutputPath": "s3://drafters-bucket/peagle",
        "KmsKeyId": KEY,
        "CompressionType": "NONE",
    }
    # g7e has local NVMe storage: no EBS size or key (SageMaker refuses VolumeKmsKeyId there)
    assert request["ResourceConfig"] == {"InstanceType": "ml.g7e.2xlarge", "InstanceCount": 1}
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 24 * 3600}
    assert request["EnableManagedSpotTraining"] is False
    assert request["EnableNetworkIsolation"] is True
    assert request["EnableInterContainerTrafficEncryption"] is True
    assert request["CheckpointConfig"] == {
        "S3Uri": f"s3://drafters-bucket/peagle/{plan.job_name}/checkpoints/",
        "LocalPath": contract.CHECKPOINT_DIR,
    }
    assert "VpcConfig" not in request
    assert plan.drafter_uri == f"s3://drafters-bucket/peagle/{plan.job_name}/output/model/drafter/"
    assert plan.num_speculative_tokens == 8
    assert plan.cost.instance_hours == 24 and plan.cost.usd is None


def test_hyperparameters_are_the_contracts_strings(tmp_path: Path) -> None:
    hps = _plan(tmp_path, learning_rate=3e-5, max_samples=5000, regenerate=False).request[
        "HyperParameters"
    ]
    assert set(hps) <= set(contract.HYPERPARAMETERS)
    assert all(isinstance(v, str) for v in hps.values())
    assert hps[contract.HP_LEARNING_RATE] == "3e-05" and float(hps["learning_rate"]) == 3e-5
    assert hps[contract.HP_MAX_SAMPLES] == "5000"
    assert hps[contract.HP_REGENERATE] == "false"
    assert hps[contract.HP_NUM_LAYERS] == "4"
    assert hps[contract.HP_DATA_FORMAT] == "openai-chat"
    assert contract.HP_MASK_TOKEN_ID not in hps  # only a stated mask id is sent
    assert (
        _plan(tmp_path, **{"target.mask_token_id": 151669}).request["HyperParameters"][
            contract.HP_MASK_TOKEN_ID
        ]
        == "151669"
    )


def test_spot_waits_at_least_the_runtime(tmp_path: Path, create_training_job: Any) -> None:
    plan = _plan(tmp_path, spot={"enabled": True, "max_wait_hours": 36}, max_runtime_hours=12)
    _valid(create_training_job, plan.request)
    assert plan.request["EnableManagedSpotTraining"] is True
    assert plan.request["StoppingCondition"] == {
        "MaxRuntimeInSeconds": 12 * 3600,
        "MaxWaitTimeInSeconds": 36 * 3600,
    }
    assert plan.cost.instance_hours == 12 and plan.cost.spot
    default = _plan(tmp_path, spot={"enabled": True}, max_runtime_hours=10).request
    assert default["StoppingCondition"]["MaxWaitTimeInSeconds"] == 20 * 3600
    off = _plan(tmp_path, spot={"enabled": False, "max_wait_hours": 30})
    assert "MaxWaitTimeInSeconds" not in off.request["StoppingCondition"]
    assert any("spot is not enabled" in w for w in off.warnings)


def test_vpc_and_an_ebs_family(tmp_path: Path, create_training_job: Any) -> None:
    vpc = {"subnets": ["subnet-0a1b2c3d4e5f60718"], "security_groups": ["sg-0a1b2c3d"]}
    plan = _plan(tmp_path, vpc=vpc, instance_type="ml.g6e.12xlarge", instance_count=2)
    _valid(create_training_job, plan.request)
    assert plan.request["VpcConfig"] == {
        "SecurityGroupIds": ["sg-0a1b2c3d"],
        "Subnets": ["subnet-0a1b2c3d4e5f60718"],
    }
    assert plan.cost.instance_hours == 48
    assert any("2 instances are billed" in w for w in plan.warnings)


def test_names_follow_the_content(tmp_path: Path) -> None:
    one, same = _plan(tmp_path), _plan(tmp_path)
    other = _plan(tmp_path, num_depths=6)
    assert one.job_name == same.job_name != other.job_name
    assert one.job_name.startswith("peagle-train-dev--support-drafter-t")
    assert len(one.job_name) <= 63
    long = _plan(tmp_path, name="a" * 40, stage="s" + "x" * 19)
    assert long.job_name.startswith(default_job_prefix("s" + "x" * 19))
    assert len(long.job_name) <= 63 - len("-r99")  # a resume keeps the digest
    own = _plan(tmp_path, job_prefix="peagle-drafters-dev-")
    assert own.job_name.startswith("peagle-drafters-dev-support-drafter-t")
    # each stage's roles are granted on `training-job/<its job prefix>*` (stage_training)
    assert one.job_name.split("support-drafter")[0] == default_job_prefix("dev")
    tags = {t["Key"]: t["Value"] for t in one.request["Tags"]}
    assert tags["peagle:managed"] == "true" and tags["peagle:stage"] == "dev"
    assert tags["peagle:model"] == "support-drafter"


def test_serving_format_follows_the_serving_vllm(tmp_path: Path) -> None:
    hp = contract.HP_SERVING_FORMAT
    assert _plan(tmp_path).request["HyperParameters"][hp] == "eagle3-native"
    assert _plan(tmp_path, serving_vllm="0.30.0").request["HyperParameters"][hp] == "speculators"
    assert _plan(tmp_path, serving_vllm="0.18.0").request["HyperParameters"][hp] == "eagle3-native"
    warned = _plan(tmp_path, serving_format="speculators")
    assert any("0.18.0" in w for w in warned.warnings)


def test_the_architecture_may_be_stated(tmp_path: Path, create_training_job: Any) -> None:
    arch = {k: QWEN3_8B[k] for k in STATED}
    plan = _plan(tmp_path, **{"target.config_dir": None, "target.architecture": arch})
    _valid(create_training_job, plan.request)
    assert any("chat template is not checked" in w for w in plan.warnings)
    assert any("mask token is not known" in w for w in plan.warnings)


def test_the_example_plans(create_training_job: Any) -> None:
    spec = load_training_spec(EXAMPLE)
    plan = build_training_plan(spec)
    _valid(create_training_job, plan.request)
    assert plan.request["EnableManagedSpotTraining"] is True
    assert plan.request["HyperParameters"]["serving_format"] == "speculators"
    document = plan_document(plan)
    assert document["create_training_job"] == plan.request
    assert document["cost"]["instance_hours"] == 24 and document["cost"]["usd"] is None


def test_the_formats_are_the_contracts() -> None:
    assert typing.get_args(DataFormat) == contract.DATA_FORMATS
    assert typing.get_args(ServingFormat) == contract.SERVING_FORMATS


def test_is_training_spec() -> None:
    assert is_training_spec({"train": {}}) and not is_training_spec({"model": "gpt-oss-20b"})


REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"region": "us east"}, "train.region"),
    ({"role_arn": "arn:aws:iam::123:user/x"}, "train.role_arn"),
    ({"image_uri": IMAGE.split("@", maxsplit=1)[0] + ":latest"}, "train.image_uri"),
    ({"image_uri": "docker.io/peagle/train@sha256:" + "ab" * 32}, "train.image_uri"),
    ({"target.model_data_uri": "s3://models-bucket/weights.tar.gz"}, "train.target.model_data_uri"),
    ({"data.data_uri": "https://example.com/chats/"}, "train.data.data_uri"),
    ({"output_uri": "s3://drafters-bucket/"}, "train.output_uri"),
    ({"output_uri": "s3://data-bucket/chats/out/"}, "train.output_uri"),
    ({"kms_key_arn": "alias/mine"}, "train.kms_key_arn"),
    ({"kms_key_arn": KEY.replace("us-east-1", "eu-west-1")}, "train.kms_key_arn"),
    ({"vpc": {"subnets": [], "security_groups": ["sg-0a1b2c3d"]}}, "train.vpc.subnets"),
    (
        {"vpc": {"subnets": ["subnet-0a1b2c3d"], "security_groups": ["x"]}},
        "train.vpc.security_groups[0]",
    ),
    ({"instance_type": "ml.m5.xlarge"}, "train.instance_type"),
    ({"instance_type": "ml.p3.2xlarge"}, "train.instance_type"),
    (
        {"spot": {"enabled": True, "max_wait_hours": 2}, "max_runtime_hours": 3},
        "train.spot.max_wait_hours",
    ),
    ({"max_runtime_hours": 28 * 24 + 1}, "train.max_runtime_hours"),
    ({"num_depths": 129}, "train.num_depths"),
    ({"num_depths": 300, "max_seq_len": 256}, "train.num_depths"),
    ({"num_layers": 37}, "train.num_layers"),
    ({"draft_vocab_size": 151937}, "train.draft_vocab_size"),
    ({"target.mask_token_id": 151936}, "train.target.mask_token_id"),
    ({"max_samples": 64}, "train.held_out_prompts"),
    ({"serving_format": "speculators", "serving_vllm": "0.18.0"}, "train.serving_format"),
    ({"serving_format": "medusa"}, "train.serving_format"),
    ({"data.format": "alpaca"}, "train.data.format"),
    ({"name": "Bad_Name"}, "train.name"),
    ({"stage": "Prod"}, "train.stage"),
    ({"learning_rate": 0}, "train.learning_rate"),
    ({"volume_size_gb": 0}, "train.volume_size_gb"),
    ({"epochs": ""}, "train.epochs"),
    ({"unknown_knob": 1}, "train.unknown_knob"),
    ({"tags": {"peagle:stage": "x"}}, "train.tags.peagle:stage"),
    ({"target.config_dir": None}, "train.target"),
    (
        {"target.architecture": {k: QWEN3_8B[k] for k in STATED}},
        "train.target.architecture",
    ),
    (
        {
            "target.config_dir": None,
            "target.architecture": {
                "model_type": "gpt_oss",
                "hidden_size": 2880,
                "num_hidden_layers": 24,
                "vocab_size": 201088,
            },
        },
        "train.target.architecture.model_type",
    ),
    ({"target.config_dir": "/nonexistent/target"}, "train.target.config_dir"),
]


@pytest.mark.parametrize(("changes", "field"), REFUSALS, ids=[f for _, f in REFUSALS])
def test_every_refusal_names_its_field(tmp_path: Path, changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        _plan(tmp_path, **copy.deepcopy(changes))
    assert caught.value.field == field
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("config", "added", "template", "problem"),
    [
        ({**QWEN3_8B, "model_type": "gpt_oss"}, None, True, "no P-EAGLE drafter class"),
        ({k: v for k, v in QWEN3_8B.items() if k != "hidden_size"}, None, True, "no hidden_size"),
        (QWEN3_8B, None, False, "no chat template"),
        ({**QWEN3_8B, "vocab_size": 151669}, None, True, "no mask token and no unused"),
    ],
)
def test_the_architecture_is_read_and_judged(
    tmp_path: Path,
    config: dict[str, Any],
    added: dict[str, str] | None,
    template: bool,
    problem: str,
) -> None:
    _target_dir(tmp_path, config, added, template=template)
    with pytest.raises(InputError) as caught:
        _plan(tmp_path)
    assert problem in caught.value.problem and caught.value.field.startswith("train.target")


def test_a_tokenizer_mask_token_or_a_template_file_is_enough(tmp_path: Path) -> None:
    folder = _target_dir(
        tmp_path,
        {**QWEN3_8B, "vocab_size": 151669},
        {**QWEN3_ADDED, "151000": "<mask>"},
        template=False,
        mask="<mask>",
    )
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    plan = build_training_plan(load_training_spec({"train": _spec(tmp_path)["train"]}))
    assert not any("mask" in w for w in plan.warnings)


def test_a_family_with_ebs_gets_the_volume_and_its_key(
    tmp_path: Path, create_training_job: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No GPU type of the catalog attaches EBS today; one that does gets VolumeSizeInGB
    and VolumeKmsKeyId (SageMaker refuses the key only with local storage)."""
    from dataclasses import replace

    from peagle_deploy.catalog import training
    from peagle_deploy.catalog.sourced import verified

    ebs = replace(
        training.TRAINING_INSTANCE_TYPES["ml.p4d.24xlarge"], ebs_volume=verified(True, "test")
    )
    monkeypatch.setitem(training.TRAINING_INSTANCE_TYPES, "ml.p4d.24xlarge", ebs)
    resources = _plan(tmp_path, instance_type="ml.p4d.24xlarge").request["ResourceConfig"]
    assert resources["VolumeSizeInGB"] == 512 and resources["VolumeKmsKeyId"] == KEY
    sized = _plan(tmp_path, instance_type="ml.p4d.24xlarge", volume_size_gb=900)
    _valid(create_training_job, sized.request)
    assert sized.request["ResourceConfig"]["VolumeSizeInGB"] == 900
    nvme = _plan(tmp_path, volume_size_gb=900)
    assert "VolumeSizeInGB" not in nvme.request["ResourceConfig"]
    assert any("local NVMe storage" in w for w in nvme.warnings)


def test_the_weights_are_estimated_and_must_fit(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    assert 16.3 < plan.target["weights_gb"] < 16.5  # Qwen3-8B: 8.19 billion parameters
    assert _plan(tmp_path, instance_type="ml.g5.2xlarge").warnings == ()  # one 24 GiB A10G
    llama_70b = {  # Llama-3-70B's shape: about 141 GB in bfloat16
        "model_type": "llama",
        "hidden_size": 8192,
        "num_hidden_layers": 80,
        "vocab_size": 128256,
        "intermediate_size": 28672,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
    }
    _target_dir(tmp_path, llama_70b, {"128000": "<|begin_of_text|>", "128255": "<|x|>"})
    with pytest.raises(InputError) as caught:
        _plan(tmp_path, **{"target.mask_token_id": 128002})  # 1 x 96 GB
    assert caught.value.field == "train.instance_type" and "do not fit" in caught.value.problem
    split = _plan(tmp_path, instance_type="ml.g7e.24xlarge", **{"target.mask_token_id": 128002})
    assert any("tensor parallel" in w for w in split.warnings)


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"train": 5}, "train"),
        ({"train": {}, "model": "gpt-oss-20b"}, "model"),
        ({"train": {}}, "train.name"),
    ],
)
def test_the_document_around_the_spec(document: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        load_training_spec(document)
    assert caught.value.field == field
