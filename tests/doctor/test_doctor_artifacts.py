"""Artifacts: model data and drafter in S3, and the P-EAGLE rules on the drafter's headers."""

from __future__ import annotations

import json
import re

from doctor_testkit import Account, by_check, make_plan, only_failure
from peagle_local.emulator.world import (
    clear_prefix,
    drafter_config,
    drafter_files,
    drafter_tensors,
    put_files,
    safetensors_bytes,
    split_s3_uri,
    target_files,
)

ARTIFACT_CHECKS = (
    "model-data.location",
    "drafter.location",
    "drafter.config",
    "drafter.weights",
    "drafter.target",
)


def test_staged_drafter_and_model_data_pass(account: Account) -> None:
    plan = make_plan()
    account.stage(plan)
    results = by_check(account.doctor(plan))
    for check in ARTIFACT_CHECKS:
        assert results[check].status == "pass", results[check].line()
    assert results["drafter.config"].detail == "P-EAGLE mask token ptd_token_id=255"
    assert results["drafter.weights"].detail.startswith("mask_hidden [1, 192]")
    # a whole sentence, not one that reads as cut off (issue 31)
    assert re.fullmatch(
        r"built for the target's hidden size \(\d+\)", results["drafter.target"].detail
    )


def test_empty_drafter_prefix_fails_naming_the_prefix(account: Account) -> None:
    plan = make_plan()
    account.stage(plan)
    assert plan.drafter_uri is not None
    clear_prefix(account.client("s3"), plan.drafter_uri)
    failure = only_failure(account.doctor(plan))
    assert (failure.check, failure.resource) == ("drafter.location", plan.drafter_uri)
    assert "no objects under the drafter prefix" in failure.detail
    assert plan.drafter_uri in failure.fix


def test_drafter_without_mask_hidden_fails(account: Account) -> None:
    plan = make_plan()
    account.stage(plan)
    assert plan.drafter_uri is not None
    put_files(
        account.client("s3"),
        plan.drafter_uri,
        drafter_files(tensors=drafter_tensors(mask_hidden=False)),
    )
    failure = only_failure(account.doctor(plan))
    assert (failure.check, failure.resource) == ("drafter.weights", plan.drafter_uri)
    assert "no mask_hidden tensor" in failure.detail


def test_plain_eagle3_head_fails_the_mask_token_rule(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    assert plan.drafter_uri is not None
    put_files(
        inprocess.client("s3"),
        plan.drafter_uri,
        drafter_files(config=drafter_config(ptd_token_id=None)),
    )
    failure = only_failure(inprocess.doctor(plan))
    assert failure.check == "drafter.config"
    assert failure.resource == plan.drafter_uri + "config.json"
    assert "has no mask-token id" in failure.detail and "--mode eagle3" in failure.fix


def test_mask_token_key_follows_the_plan_engine(inprocess: Account) -> None:
    """vLLM 0.18.0 (the default image) reads pard_token / ptd_token_id only; 0.27.1 adds
    dflash_config.mask_token_id (catalog/data/engines.json)."""
    config = drafter_config(ptd_token_id=None, dflash_config={"mask_token_id": 255})
    old = make_plan()
    assert old.vllm_version == "0.18.0"
    inprocess.stage(old)
    assert old.drafter_uri is not None
    put_files(inprocess.client("s3"), old.drafter_uri, drafter_files(config=config))
    failure = only_failure(inprocess.doctor(old))
    assert failure.check == "drafter.config"
    assert "ptd_token_id" in failure.detail

    newer = make_plan(
        image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:"
        "0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker"
    )
    assert newer.vllm_version == "0.27.1"
    assert newer.drafter_uri == old.drafter_uri  # staged above, with the dflash key
    results = by_check(inprocess.doctor(newer))
    assert results["drafter.config"].status == "pass", results["drafter.config"].line()
    assert "dflash_config.mask_token_id=255" in results["drafter.config"].detail


def test_plain_eagle3_head_passes_in_eagle3_mode(inprocess: Account) -> None:
    plan = make_plan(**{"speculative.mode": "eagle3"})
    inprocess.stage(plan)
    assert plan.drafter_uri is not None
    put_files(
        inprocess.client("s3"),
        plan.drafter_uri,
        drafter_files(drafter_config(ptd_token_id=None), drafter_tensors(mask_hidden=False)),
    )
    report = inprocess.doctor(plan)
    assert report.ok, [r.line() for r in report.results]


def test_mask_hidden_of_the_wrong_size_fails(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    assert plan.drafter_uri is not None
    tensors = drafter_tensors(mask_hidden=False)
    tensors["mask_hidden"] = ("BF16", (1, 64))
    put_files(inprocess.client("s3"), plan.drafter_uri, drafter_files(tensors=tensors))
    failure = only_failure(inprocess.doctor(plan))
    assert failure.check == "drafter.weights" and "expected 192 values" in failure.detail


def test_drafter_for_another_target_fails(account: Account) -> None:
    plan = make_plan()
    account.stage(plan)
    put_files(account.client("s3"), plan.model_data_uri, target_files(hidden=128))
    failure = only_failure(account.doctor(plan))
    assert failure.check == "drafter.target"
    assert "hidden size 64" in failure.detail and "hidden size 128" in failure.detail


def test_sharded_drafter_is_read_through_its_index(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    assert plan.drafter_uri is not None
    s3 = inprocess.client("s3")
    clear_prefix(s3, plan.drafter_uri)
    tensors = drafter_tensors()
    names = list(tensors)
    shards = {
        "model-00001-of-00002.safetensors": names[:1],
        "model-00002-of-00002.safetensors": names[1:],
    }
    files = {"config.json": json.dumps(drafter_config()).encode()}
    weight_map = {}
    for shard, members in shards.items():
        files[shard] = safetensors_bytes({n: tensors[n] for n in members})
        weight_map.update({n: shard for n in members})
    files["model.safetensors.index.json"] = json.dumps({"weight_map": weight_map}).encode()
    put_files(s3, plan.drafter_uri, files)
    assert by_check(inprocess.doctor(plan))["drafter.weights"].status == "pass"
    bucket, key = split_s3_uri(plan.drafter_uri)
    s3.delete_object(Bucket=bucket, Key=key + "model-00002-of-00002.safetensors")
    failure = only_failure(inprocess.doctor(plan))
    assert failure.check == "drafter.weights"
    assert "names shard model-00002-of-00002.safetensors" in failure.detail


def test_reads_only_headers_with_ranged_gets(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    assert plan.drafter_uri is not None
    tensors = drafter_tensors()
    tensors["lm_head.weight"] = ("BF16", (4096, 256))  # 2 MB of weights after the header
    put_files(inprocess.client("s3"), plan.drafter_uri, drafter_files(tensors=tensors))
    inprocess.record()
    assert inprocess.doctor(plan).ok
    gets = [params for name, params in inprocess.calls if name == "GetObject"]
    assert gets and all("Range" in params for params in gets)
    weights = [p for p in gets if p["Key"].endswith(".safetensors")]
    spans = [tuple(int(x) for x in p["Range"].removeprefix("bytes=").split("-")) for p in weights]
    assert spans[0] == (0, 7)  # the 8-byte header length first
    assert sum(last - first + 1 for first, last in spans) < 4096  # never the 2 MB of data


def test_k_above_the_trained_count_warns(inprocess: Account) -> None:
    # the count the plan renders from the catalog (the model card's 18) comes first ...
    plan = make_plan(**{"speculative.num_speculative_tokens": 19})
    inprocess.stage(plan)
    report = inprocess.doctor(plan)
    line = by_check(report)["drafter.trained-tokens"]
    assert report.ok and line.status == "warn"
    assert "K=19 is above the 18 tokens" in line.detail


def test_k_above_the_drafter_configs_count_warns(inprocess: Account) -> None:
    # with the variable empty (unset, for the container too): the drafter's config.json
    plan = make_plan(
        **{"speculative.num_speculative_tokens": 9, "env": {"PEAGLE_DRAFTER_TRAINED_TOKENS": ""}}
    )
    inprocess.stage(plan)
    assert plan.drafter_uri is not None
    config = drafter_config(n_predict=5)
    put_files(inprocess.client("s3"), plan.drafter_uri, drafter_files(config=config))
    report = inprocess.doctor(plan)
    line = by_check(report)["drafter.trained-tokens"]
    assert report.ok and line.status == "warn"
    assert "K=9 is above the 5 tokens" in line.detail


def test_pytorch_weights_cannot_be_checked(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    assert plan.drafter_uri is not None
    s3 = inprocess.client("s3")
    clear_prefix(s3, plan.drafter_uri)
    put_files(
        s3,
        plan.drafter_uri,
        {"config.json": json.dumps(drafter_config()).encode(), "pytorch_model.bin": b"\0" * 64},
    )
    report = inprocess.doctor(plan)
    assert report.ok and by_check(report)["drafter.weights"].status == "warn"


def test_missing_model_data_bucket_fails(inprocess: Account) -> None:
    plan = make_plan(**{"custom.model_data_uri": "s3://no-such-peagle-bucket/qwen/"})
    inprocess.stage(plan)
    bucket, _ = split_s3_uri(plan.model_data_uri)
    clear_prefix(inprocess.client("s3"), plan.model_data_uri)
    inprocess.client("s3").delete_bucket(Bucket=bucket)
    results = by_check(inprocess.doctor(plan))
    line = results["model-data.location"]
    assert line.status == "fail" and line.detail == f"bucket {bucket} does not exist"


def test_model_data_in_another_region_fails(inprocess: Account) -> None:
    s3 = inprocess.client("s3")
    s3.create_bucket(
        Bucket="peagle-weights-eu", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    plan = make_plan(**{"custom.model_data_uri": "s3://peagle-weights-eu/qwen/"})
    inprocess.stage(plan)
    line = by_check(inprocess.doctor(plan))["model-data.location"]
    assert line.status == "fail" and "is in eu-west-1, the endpoint in us-east-1" in line.detail


def test_listing_denied_is_a_warning_not_a_failure(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    inprocess.deny("ListObjectsV2", "s3")
    report = inprocess.doctor(plan)
    assert report.ok
    line = by_check(report)["model-data.location"]
    assert line.status == "warn" and "could not check: no permission" in line.detail


def test_model_archive_object(inprocess: Account) -> None:
    plan = make_plan(**{"custom.model_data_uri": "s3://peagle-archives/qwen/model.tar.gz"})
    inprocess.stage(plan)
    results = by_check(inprocess.doctor(plan))
    assert results["model-data.location"].status == "pass"
    assert results["drafter.target"].status == "warn"  # an archive cannot be read in place
    inprocess.client("s3").delete_object(Bucket="peagle-archives", Key="qwen/model.tar.gz")
    line = by_check(inprocess.doctor(plan))["model-data.location"]
    assert (line.status, line.detail) == ("fail", "the model data object does not exist")


def test_hostile_config_and_header_fail_cleanly(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    assert plan.drafter_uri is not None
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    s3 = inprocess.client("s3")
    put_files(s3, plan.drafter_uri, {"config.json": deep})
    line = only_failure(inprocess.doctor(plan))
    assert line.check == "drafter.config"
    assert line.detail.startswith("nested too deeply (more than 64 levels")
    header = b'{"a":' + deep + b"}"
    blob = len(header).to_bytes(8, "little") + header
    put_files(s3, plan.drafter_uri, {"config.json": json.dumps(drafter_config()).encode()})
    put_files(s3, plan.drafter_uri, {"model.safetensors": blob})
    line = only_failure(inprocess.doctor(plan))
    assert line.check == "drafter.weights" and "nested too deeply" in line.detail
