"""The emulator's training jobs: lifecycle, failures, stop, refusals, logs, and the drafter
its driver really trains (and that an emulated endpoint then really drafts with)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from peagle_local.emulator import LocalAWS
from peagle_local.emulator.table_drafter import TableDrafter, read_drafter, speculate
from peagle_local.emulator.training_jobs import LOG_GROUP
from peagle_local.emulator.world import SAGEMAKER_TRUST, put_files, target_files
from peagle_serve import drafter_rules
from peagle_serve.contract import parse_metric_line
from peagle_serve.safetensors_header import header_length, parse_header
from peagle_train import contract

BUCKET = "peagle-train-test"
ROLE = "arn:aws:iam::123456789012:role/peagle-training"
OUTPUT = f"s3://{BUCKET}/jobs"
PHASE_S = {"starting_s": 10, "downloading_s": 20, "training_s": 60, "uploading_s": 5}


def conversations(n: int = 40) -> bytes:
    lines = [
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": f"How do I sort list number {i}?"},
                    {"role": "assistant", "content": f"Use sorted() on list {i}."},
                ]
            }
        )
        for i in range(n)
    ]
    return "\n".join(lines).encode()


def stage(aws: LocalAWS, *, data: bytes | None = None, trust: dict[str, Any] | None = None) -> None:
    """The role, the target's files and the conversations in the emulated account."""
    aws.client("iam").create_role(
        RoleName="peagle-training", AssumeRolePolicyDocument=json.dumps(trust or SAGEMAKER_TRUST)
    )
    s3 = aws.client("s3")
    put_files(s3, f"s3://{BUCKET}/target/", target_files())
    if data is not None:
        put_files(s3, f"s3://{BUCKET}/data/", {"chat.jsonl": data})


def request(name: str = "peagle-job", **changes: Any) -> dict[str, Any]:
    hp = {contract.HP_NUM_DEPTHS: "3", contract.HP_ACCEPTANCE_FLOOR: "1.5"}
    out: dict[str, Any] = {
        "TrainingJobName": name,
        "RoleArn": ROLE,
        "AlgorithmSpecification": {
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-train:0.1.0",
            "TrainingInputMode": "File",
        },
        "HyperParameters": {**hp, **changes.pop("hp", {})},
        "InputDataConfig": [
            {
                "ChannelName": channel,
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": f"s3://{BUCKET}/{channel}/",
                    }
                },
            }
            for channel in contract.CHANNELS
        ],
        "OutputDataConfig": {"S3OutputPath": OUTPUT, "CompressionType": "NONE"},
        "ResourceConfig": {
            "InstanceType": "ml.g6e.xlarge",
            "InstanceCount": 1,
            "VolumeSizeInGB": 100,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "EnableNetworkIsolation": True,
        "Tags": [{"Key": "peagle:stage", "Value": "dev"}],
    }
    out.update(changes)
    return out


def status(aws: LocalAWS, name: str = "peagle-job") -> dict[str, Any]:
    return dict(aws.client("sagemaker").describe_training_job(TrainingJobName=name))


def run_to_end(aws: LocalAWS, clock: Any, name: str = "peagle-job") -> dict[str, Any]:
    clock.advance(sum(PHASE_S.values()) + 1)
    return status(aws, name)


def files(aws: LocalAWS, prefix: str) -> dict[str, bytes]:
    s3 = aws.client("s3")
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {
        o["Key"][len(prefix) :]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
        for o in listed
    }


def drafter_prefix(name: str = "peagle-job") -> str:
    return contract.drafter_uri(OUTPUT, name).removeprefix(f"s3://{BUCKET}/")


def test_a_job_goes_through_every_secondary_status_to_completed(
    local_aws: LocalAWS, clock: Any
) -> None:
    stage(local_aws, data=conversations())
    local_aws.script_training_job(**PHASE_S)
    local_aws.client("sagemaker").create_training_job(**request())
    seen = []
    for step in (0, 10, 20, 60, 5):
        clock.advance(step)
        described = status(local_aws)
        seen.append((described["TrainingJobStatus"], described["SecondaryStatus"]))
    assert seen == [
        ("InProgress", "Starting"),
        ("InProgress", "Downloading"),
        ("InProgress", "Training"),
        ("InProgress", "Uploading"),
        ("Completed", "Completed"),
    ]
    transitions = described["SecondaryStatusTransitions"]
    assert [t["Status"] for t in transitions] == [
        "Starting",
        "Downloading",
        "Training",
        "Uploading",
        "Completed",
    ]
    spans = [(t["EndTime"] - t["StartTime"]).total_seconds() for t in transitions[:4]]
    assert spans == [10, 20, 60, 5]
    assert all(t["StatusMessage"] for t in transitions)
    assert described["TrainingTimeInSeconds"] == 65  # Training and Uploading
    assert described["TrainingEndTime"] == transitions[-1]["StartTime"]
    assert described["EnableNetworkIsolation"] is True
    assert "FailureReason" not in described
    tags = local_aws.client("sagemaker").list_tags(ResourceArn=described["TrainingJobArn"])
    assert tags["Tags"] == [{"Key": "peagle:stage", "Value": "dev"}]


def test_the_output_holds_a_trained_drafter_and_its_metadata(
    local_aws: LocalAWS, clock: Any
) -> None:
    stage(local_aws, data=conversations())
    local_aws.script_training_job(**PHASE_S)
    local_aws.client("sagemaker").create_training_job(**request(hp={"num_depths": "4"}))
    assert run_to_end(local_aws, clock)["TrainingJobStatus"] == "Completed"
    out = files(local_aws, drafter_prefix())
    assert set(out) == {"config.json", "model.safetensors", contract.METADATA_FILE}
    metadata = json.loads(out[contract.METADATA_FILE])
    assert metadata["num_depths"] == 4
    parsed = contract.parse_metadata(out[contract.METADATA_FILE].decode())  # the SDK's reader
    assert parsed.num_depths == 4 and parsed.aux_layer_ids == (2, 2, 1)
    assert metadata["serving_format"] == "speculators"
    assert metadata["target_hidden_size"] == 64 and metadata["target_model_type"] == "llama"
    assert len(metadata["acceptance_per_position"]) == 4
    assert metadata["mean_accepted_per_step"] == pytest.approx(
        sum(metadata["acceptance_per_position"]), abs=1e-3
    )
    assert metadata["mean_accepted_per_step"] > 3.0  # of 4 drafted per step
    assert len(metadata["data_sha256"]) == 64
    # what the doctor and the container read: a P-EAGLE config and its tensors
    config = json.loads(out["config.json"])
    assert drafter_rules.trained_tokens(config) == (drafter_rules.TRAINED_TOKENS_KEYS[0], 4)
    assert drafter_rules.mask_token_problem(config, "config.json") is None
    weights = out["model.safetensors"]
    n = header_length(weights[:8], "model.safetensors")
    tensors = parse_header(weights[8 : 8 + n], n, "model.safetensors")
    assert drafter_rules.mask_hidden_problem(tensors, config, "model.safetensors") is None
    drafter = read_drafter(out["config.json"], weights)
    assert drafter is not None and drafter.depth == 4


def test_the_eagle3_native_format_carries_the_mask_token_vllm_0_18_reads(
    local_aws: LocalAWS, clock: Any
) -> None:
    stage(local_aws, data=conversations())
    local_aws.client("sagemaker").create_training_job(
        **request(hp={"serving_format": "eagle3-native"})
    )
    assert status(local_aws)["TrainingJobStatus"] == "Completed"  # no script: instant
    config = json.loads(files(local_aws, drafter_prefix())["config.json"])
    assert drafter_rules.find_mask_token(config) == ("ptd_token_id", 255)
    assert config["target_hidden_size"] == 64


def test_trained_beats_untrained_in_the_job_and_on_the_endpoint(
    local_aws: LocalAWS, clock: Any
) -> None:
    stage(local_aws, data=conversations())
    local_aws.client("sagemaker").create_training_job(**request())
    status(local_aws)
    trained_files = files(local_aws, drafter_prefix())
    # the same drafter before training, in the same format, at another prefix
    untrained = TableDrafter.untrained(3, seed=0)
    from peagle_local.emulator.table_drafter import drafter_files

    config = json.loads(trained_files["config.json"])
    put_files(
        local_aws.client("s3"),
        f"s3://{BUCKET}/untrained/",
        drafter_files(untrained, config, draft_vocab_size=32),
    )
    rates = {}
    for label, prefix in (("trained", drafter_prefix()), ("untrained", "untrained/")):
        endpoint = serve(local_aws, label, f"s3://{BUCKET}/{prefix}", k=3)
        rates[label] = mean_acceptance_length(local_aws, endpoint)
    assert rates["trained"] > 3.5  # of 1 + K = 4 at most
    assert rates["untrained"] < 1.3
    job_line = next(line for line in job_log(local_aws) if "held-out acceptance" in line)
    assert "untrained 0.0" in job_line


def serve(aws: LocalAWS, label: str, drafter_uri: str, *, k: int) -> str:
    """An endpoint of the emulated target with `drafter_uri`, invoked a few times."""
    sm = aws.client("sagemaker")
    name = f"emu-{label}"
    sm.create_model(
        ModelName=name,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={
            "Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0",
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": f"s3://{BUCKET}/target/",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
            "AdditionalModelDataSources": [
                {
                    "ChannelName": "eagle",
                    "S3DataSource": {
                        "S3Uri": drafter_uri,
                        "S3DataType": "S3Prefix",
                        "CompressionType": "None",
                    },
                }
            ],
            "Environment": {
                "SM_VLLM_SPECULATIVE_CONFIG": json.dumps(
                    {"method": "eagle3", "num_speculative_tokens": k, "parallel_drafting": True}
                )
            },
        },
    )
    sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InstanceType": "ml.g6e.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    runtime = aws.client("sagemaker-runtime")
    for i in range(6):
        body = {"messages": [{"role": "user", "content": f"held-out question {i}"}]}
        runtime.invoke_endpoint(EndpointName=name, Body=json.dumps(body))
    return name


def mean_acceptance_length(aws: LocalAWS, endpoint: str) -> float:
    docs = [d for d in map(parse_metric_line, aws.log_lines(endpoint)) if d is not None]
    assert len(docs) == 6
    return sum(float(d["mean_acceptance_length"]) for d in docs) / len(docs)


def test_an_endpoint_drafts_with_the_table_not_with_a_number(local_aws: LocalAWS) -> None:
    """The metric line of a request is what the drafter accepts on that very answer."""
    from peagle_local.emulator.chat import ChatRequest, generate, token_ids

    stage(local_aws, data=conversations())
    local_aws.client("sagemaker").create_training_job(**request())
    status(local_aws)
    endpoint = serve(local_aws, "exact", contract.drafter_uri(OUTPUT, "peagle-job"), k=5)
    out = files(local_aws, drafter_prefix())
    drafter = read_drafter(out["config.json"], out["model.safetensors"])
    assert drafter is not None
    docs = [d for d in map(parse_metric_line, local_aws.log_lines(endpoint)) if d is not None]
    first = ChatRequest(
        [{"role": "user", "content": "held-out question 0"}], "m", None, False, False
    )
    expected = speculate(drafter, [token_ids(generate(first)[0])], 5)
    assert docs[0]["acceptance_rate_per_position"] == pytest.approx(list(expected.per_position))
    # trained for 3: positions 4 and 5 have no draft to accept
    assert docs[0]["acceptance_rate_per_position"][3:] == [0.0, 0.0]


def job_log(aws: LocalAWS, name: str = "peagle-job") -> list[str]:
    logs = aws.client("logs")
    streams = logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{name}/")
    out = []
    for stream in streams["logStreams"]:
        assert stream["logStreamName"].startswith(f"{name}/algo-1-")
        events = logs.get_log_events(logGroupName=LOG_GROUP, logStreamName=stream["logStreamName"])
        out += [e["message"] for e in events["events"]]
    return out


def test_the_driver_logs_to_the_training_log_group(local_aws: LocalAWS) -> None:
    stage(local_aws, data=conversations())
    local_aws.client("sagemaker").create_training_job(**request())
    status(local_aws)
    lines = job_log(local_aws)
    assert any("regenerated by the target (on-policy)" in line for line in lines)
    assert any(line.endswith(contract.drafter_uri(OUTPUT, "peagle-job")) for line in lines)


@pytest.mark.parametrize(
    ("changes", "data", "reason"),
    [
        ({}, None, "ClientError: No S3 objects found under S3 URL"),
        ({"hp": {"acceptance_floor": "9"}}, conversations(), "below the floor 9"),
        ({"hp": {"num_depths": "three"}}, conversations(), "num_depths must be a whole number"),
        ({}, b'{"prompt": "no messages"}\n', "line 1 is not a record in the openai-chat format"),
    ],
    ids=["empty-data-prefix", "acceptance-floor", "bad-hyperparameter", "not-chat"],
)
def test_a_job_fails_with_its_reason(
    local_aws: LocalAWS,
    clock: Any,
    changes: dict[str, Any],
    data: bytes | None,
    reason: str,
) -> None:
    stage(local_aws, data=data)
    if data is None:  # the data channel's prefix exists as a bucket, holds nothing
        put_files(local_aws.client("s3"), f"s3://{BUCKET}/elsewhere/", {"x": b"1"})
    local_aws.script_training_job(**PHASE_S)
    local_aws.client("sagemaker").create_training_job(**request(**changes))
    described = run_to_end(local_aws, clock)
    assert described["TrainingJobStatus"] == "Failed"
    assert described["SecondaryStatus"] == "Failed"
    assert reason in described["FailureReason"]
    if data is not None:
        assert described["FailureReason"].startswith("AlgorithmError: ")
    assert not files(local_aws, drafter_prefix())
    assert any(reason in line for line in job_log(local_aws))


def test_a_missing_channel_fails_the_job(local_aws: LocalAWS) -> None:
    stage(local_aws, data=conversations())
    only_data = request()
    only_data["InputDataConfig"] = only_data["InputDataConfig"][1:]
    local_aws.client("sagemaker").create_training_job(**only_data)
    assert "channel target missing" in status(local_aws)["FailureReason"]


def test_a_scripted_start_failure(local_aws: LocalAWS, clock: Any) -> None:
    stage(local_aws, data=conversations())
    local_aws.script_training_job(
        "peagle-job", starting_s=5, fail_reason="CapacityError: no ml.g6e.xlarge capacity"
    )
    local_aws.client("sagemaker").create_training_job(**request())
    clock.advance(5)
    described = status(local_aws)
    assert (described["TrainingJobStatus"], described["FailureReason"]) == (
        "Failed",
        "CapacityError: no ml.g6e.xlarge capacity",
    )
    assert [t["Status"] for t in described["SecondaryStatusTransitions"]] == [
        "Starting",
        "Failed",
    ]


def test_stop_goes_through_stopping_to_stopped(local_aws: LocalAWS, clock: Any) -> None:
    stage(local_aws, data=conversations())
    local_aws.script_training_job(**PHASE_S, stopping_s=3)
    sm = local_aws.client("sagemaker")
    sm.create_training_job(**request())
    clock.advance(40)  # in Training
    sm.stop_training_job(TrainingJobName="peagle-job")
    described = status(local_aws)
    assert (described["TrainingJobStatus"], described["SecondaryStatus"]) == (
        "Stopping",
        "Stopping",
    )
    clock.advance(3)
    described = status(local_aws)
    assert (described["TrainingJobStatus"], described["SecondaryStatus"]) == (
        "Stopped",
        "Stopped",
    )
    clock.advance(100)  # the training it was in never finishes
    assert status(local_aws)["TrainingJobStatus"] == "Stopped"
    assert not files(local_aws, drafter_prefix())
    with pytest.raises(ClientError, match="in status Stopped"):
        sm.stop_training_job(TrainingJobName="peagle-job")


def test_list_filters_sorts_and_pages(local_aws: LocalAWS, clock: Any) -> None:
    stage(local_aws, data=conversations())
    sm = local_aws.client("sagemaker")
    for i in range(3):
        local_aws.script_training_job(f"job-{i}", **(PHASE_S if i == 2 else {}))
        sm.create_training_job(**request(f"job-{i}"))
        clock.advance(1)
    newest_first = sm.list_training_jobs(SortOrder="Descending")["TrainingJobSummaries"]
    assert [j["TrainingJobName"] for j in newest_first] == ["job-2", "job-1", "job-0"]
    listed = sm.list_training_jobs(SortBy="Name")  # Ascending by default
    assert [j["TrainingJobName"] for j in listed["TrainingJobSummaries"]] == [
        "job-0",
        "job-1",
        "job-2",
    ]
    running = sm.list_training_jobs(StatusEquals="InProgress")["TrainingJobSummaries"]
    assert [j["TrainingJobName"] for j in running] == ["job-2"]
    first = sm.list_training_jobs(MaxResults=2)
    rest = sm.list_training_jobs(MaxResults=2, NextToken=first["NextToken"])
    assert len(first["TrainingJobSummaries"]) == 2 and len(rest["TrainingJobSummaries"]) == 1
    assert "NextToken" not in rest
    assert first["TrainingJobSummaries"][0]["TrainingJobName"] == "job-0"  # oldest first
    assert (
        sm.list_training_jobs(NameContains="job-1")["TrainingJobSummaries"][0]["TrainingJobStatus"]
        == "Completed"
    )


def refused(aws: LocalAWS, params: dict[str, Any]) -> ClientError:
    sm = aws.client("sagemaker", config=Config(parameter_validation=False))
    with pytest.raises(ClientError) as caught:
        sm.create_training_job(**params)
    return caught.value


@pytest.mark.parametrize(
    ("changes", "code", "message"),
    [
        (
            {"EnableManagedSpotTraining": True},
            "ValidationException",
            "MaxWaitTimeInSeconds is required",
        ),
        (
            {
                "EnableManagedSpotTraining": True,
                "StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 60},
            },
            "ValidationException",
            "must be equal to or greater than MaxRuntimeInSeconds",
        ),
        (
            {"StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}},
            "ValidationException",
            "only supported when EnableManagedSpotTraining",
        ),
        (
            {"RoleArn": "arn:aws:iam::123456789012:role/absent"},
            "ValidationException",
            "Could not assume role",
        ),
        (
            {
                "ResourceConfig": {
                    "InstanceType": "ml.g9.huge",
                    "InstanceCount": 1,
                    "VolumeSizeInGB": 1,
                }
            },
            "ValidationException",
            "instanceType",
        ),
        (
            {"StoppingCondition": {"MaxRuntimeInSeconds": 0}},
            "ValidationException",
            "MaxRuntimeInSeconds",
        ),
        ({"OutputDataConfig": None}, "ValidationException", "OutputDataConfig"),
        (
            {"AlgorithmSpecification": {"TrainingInputMode": "File"}},
            "ValidationException",
            "TrainingImage",
        ),
    ],
    ids=[
        "spot-no-wait",
        "wait-below-runtime",
        "wait-without-spot",
        "no-role",
        "instance-type",
        "no-runtime",
        "no-output",
        "no-image",
    ],
)
def test_refuses_what_sagemaker_refuses(
    local_aws: LocalAWS, changes: dict[str, Any], code: str, message: str
) -> None:
    stage(local_aws, data=conversations())
    params = {k: v for k, v in request(**changes).items() if v is not None}
    error = refused(local_aws, params)
    assert error.response["Error"]["Code"] == code
    assert message in error.response["Error"]["Message"]
    assert not local_aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]


def test_refuses_a_role_sagemaker_cannot_assume(local_aws: LocalAWS) -> None:
    ec2_trust = json.loads(json.dumps(SAGEMAKER_TRUST).replace("sagemaker", "ec2"))
    stage(local_aws, data=conversations(), trust=ec2_trust)
    assert "Could not assume role" in str(refused(local_aws, request()))


def test_refuses_a_name_in_use(local_aws: LocalAWS) -> None:
    stage(local_aws, data=conversations())
    local_aws.client("sagemaker").create_training_job(**request())
    error = refused(local_aws, request())
    assert error.response["Error"]["Code"] == "ResourceInUse"
    assert "training-job/peagle-job" in error.response["Error"]["Message"]


def test_off_policy_answers_train_a_drafter_the_target_does_not_follow(
    local_aws: LocalAWS,
) -> None:
    """`regenerate: false` fits the written answers, which the emulated target never
    writes: its held-out acceptance is far below the on-policy drafter's."""
    stage(local_aws, data=conversations())
    sm = local_aws.client("sagemaker")
    sm.create_training_job(**request("on", hp={"acceptance_floor": "0"}))
    sm.create_training_job(**request("off", hp={"acceptance_floor": "0", "regenerate": "false"}))
    figures = {}
    for name in ("on", "off"):
        assert status(local_aws, name)["TrainingJobStatus"] == "Completed"
        out = files(local_aws, drafter_prefix(name))
        figures[name] = json.loads(out[contract.METADATA_FILE])["mean_accepted_per_step"]
    assert figures["on"] > 2.5 and figures["off"] < 0.5


def test_as_peagle_emulator_start_serves_it_the_drafter_still_decides() -> None:
    """With variants served as their models say (`peagle emulator start`), an endpoint
    with the emulator's trained drafter reports that drafter's acceptance, not the
    default variant's scripted rate (0.6)."""
    with LocalAWS(variants_from_models=True) as aws:
        stage(aws, data=conversations())
        aws.client("sagemaker").create_training_job(**request())
        assert status(aws)["TrainingJobStatus"] == "Completed"
        endpoint = serve(aws, "start", contract.drafter_uri(OUTPUT, "peagle-job"), k=3)
        assert mean_acceptance_length(aws, endpoint) > 3.5


@pytest.mark.parametrize(
    ("data_format", "record"),
    [
        (
            "sharegpt",
            lambda i: {
                "conversations": [
                    {"from": "human", "value": f"How do I sort list number {i}?"},
                    {"from": "gpt", "value": "Use sorted()."},
                ]
            },
        ),
        (
            "openai-completions",
            lambda i: {"prompt": f"How do I sort list number {i}?", "completion": "Use sorted()."},
        ),
    ],
)
def test_the_other_data_formats_train_the_same_drafter(
    local_aws: LocalAWS, data_format: str, record: Any
) -> None:
    """The same prompts in another of contract.DATA_FORMATS: the target regenerates the
    same answers, so the drafter and its held-out figures are the chat format's."""
    stage(local_aws, data=b"\n".join(json.dumps(record(i)).encode() for i in range(40)))
    put_files(local_aws.client("s3"), f"s3://{BUCKET}/chat/", {"chat.jsonl": conversations()})
    sm = local_aws.client("sagemaker")
    sm.create_training_job(**request("other", hp={"data_format": data_format}))
    chat = request("chat")
    chat["InputDataConfig"][1]["DataSource"]["S3DataSource"]["S3Uri"] = f"s3://{BUCKET}/chat/"
    sm.create_training_job(**chat)
    metadata = {}
    for name in ("other", "chat"):
        assert status(local_aws, name)["TrainingJobStatus"] == "Completed"
        metadata[name] = json.loads(files(local_aws, drafter_prefix(name))[contract.METADATA_FILE])
    keys = ("acceptance_per_position", "mean_accepted_per_step", "held_out_prompts")
    assert [metadata["other"][k] for k in keys] == [metadata["chat"][k] for k in keys]
    assert metadata["other"]["data_sha256"] != metadata["chat"]["data_sha256"]


def test_the_metadata_names_the_mask_token_and_layers_a_head_for_this_target_uses(
    local_aws: LocalAWS,
) -> None:
    stage(local_aws, data=conversations())
    local_aws.client("sagemaker").create_training_job(**request(hp={"mask_token_id": "254"}))
    assert status(local_aws)["TrainingJobStatus"] == "Completed"
    out = files(local_aws, drafter_prefix())
    metadata = json.loads(out[contract.METADATA_FILE])
    assert metadata["mask_token_id"] == 254
    assert metadata["aux_layer_ids"] == [2, 2, 1]  # vLLM's (2, L // 2, L - 3), L = 4
    config = json.loads(out["config.json"])
    assert drafter_rules.find_mask_token(config) == ("mask_token_id", 254)
    assert config["eagle_aux_hidden_state_layer_ids"] == [2, 2, 1]
