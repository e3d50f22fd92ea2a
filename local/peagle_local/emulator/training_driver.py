"""What the emulator runs inside a training job: the driver's steps on the emulated target.

The real driver (container/peagle_train) regenerates the answers with the target,
trains a P-EAGLE head with speculators, measures it with vLLM and writes it. Here the
same steps run in-process on the emulator's S3 (moto's backend), with the emulator's
target (`chat.generate`) and drafter (`table_drafter`, not a P-EAGLE network):

1. the `target` and `data` channels (contract.CHANNELS) and the target's config.json;
2. the chat JSONL records of `data` (one JSON object with a `messages` list a line),
   shuffled with `seed`; `held_out_prompts` of them kept aside (at most a fifth of the
   records), up to `max_samples` of the rest trained on;
3. answers: the target regenerates them from the prompts (`regenerate` true: on-policy)
   or the records' own assistant answers are read in the emulator's vocabulary;
4. the table fitted for `num_depths` positions, its acceptance per position measured
   on the held-out prompts against what the target generates, beside the same table
   untrained; below `acceptance_floor` (tokens per step, contract.floor_reason) the job fails;
5. Uploading writes config.json, model.safetensors and contract.METADATA_FILE to
   `contract.drafter_uri(S3OutputPath, job)`.

`epochs`, `learning_rate`, `num_layers` and `draft_vocab_size` shape nothing a table fit
(counting) does; the last two are written into the drafter's config and metadata as the
job asked, so what the SDK reads back is what it requested.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from peagle_train import contract

from peagle_local.emulator.chat import VOCABULARY, ChatRequest, generate, token_ids
from peagle_local.emulator.table_drafter import (
    SpecCounts,
    TableDrafter,
    drafter_config,
    drafter_files,
    speculate,
)

DEFAULTS: dict[str, str] = {
    contract.HP_NUM_DEPTHS: "3",
    contract.HP_NUM_LAYERS: "1",
    contract.HP_DRAFT_VOCAB: str(len(VOCABULARY)),
    contract.HP_MAX_SEQ_LEN: "64",
    contract.HP_MAX_SAMPLES: "0",
    contract.HP_REGENERATE: "true",
    contract.HP_SERVING_FORMAT: "speculators",
    contract.HP_ACCEPTANCE_FLOOR: "0",
    contract.HP_HELD_OUT: "8",
    contract.HP_SEED: "0",
    contract.HP_DATA_FORMAT: "openai-chat",
}
"""What the emulated driver assumes for a hyperparameter the job does not set
(`max_samples` 0: every record)."""


@dataclass(frozen=True)
class DriverFailure:
    """The text the driver would write to /opt/ml/output/failure, and its log."""

    reason: str
    log_lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DriverResult:
    """A trained drafter ready to upload."""

    drafter_uri: str
    files: dict[str, bytes]
    trained: SpecCounts
    untrained: SpecCounts
    log_lines: list[str] = field(default_factory=list)


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _objects(account_id: str, uri: str) -> dict[str, bytes]:
    """Every object under an S3 prefix of the emulator's S3, by key."""
    from moto.s3.models import s3_backends

    backend = s3_backends[account_id]["global"]
    bucket, prefix = _split(uri)
    try:
        found = backend.get_bucket(bucket)
    except Exception:
        return {}
    return {
        key: obj.value
        for key, obj in found.keys.items()
        if key.startswith(prefix) and not key.endswith("/")
    }


def _channels(request: Mapping[str, Any]) -> dict[str, str]:
    return {
        str(c["ChannelName"]): str(c.get("DataSource", {}).get("S3DataSource", {}).get("S3Uri", ""))
        for c in request.get("InputDataConfig") or []
    }


def empty_channel(account_id: str, request: Mapping[str, Any]) -> str | None:
    """SageMaker's download failure for a channel whose S3 prefix holds nothing."""
    for name, uri in _channels(request).items():
        if uri and not _objects(account_id, uri):
            return (
                f'ClientError: No S3 objects found under S3 URL "{uri}" given in input data '
                f"source (channel {name}). Please ensure that the bucket exists in the selected "
                "region, that objects exist under that S3 prefix, and that the role has "
                '"s3:ListBucket" permissions on the bucket.'
            )
    return None


def _hyperparameters(request: Mapping[str, Any]) -> dict[str, str] | str:
    given = {str(k): str(v) for k, v in (request.get("HyperParameters") or {}).items()}
    values = {**DEFAULTS, **given}
    ints = (
        contract.HP_NUM_DEPTHS,
        contract.HP_NUM_LAYERS,
        contract.HP_DRAFT_VOCAB,
        contract.HP_MAX_SEQ_LEN,
        contract.HP_MAX_SAMPLES,
        contract.HP_HELD_OUT,
        contract.HP_SEED,
    )
    for name in ints:
        if not values[name].isdigit():
            return f"hyperparameter {name} must be a whole number, got {values[name]!r}"
    if int(values[contract.HP_NUM_DEPTHS]) < 1 or int(values[contract.HP_HELD_OUT]) < 1:
        return f"hyperparameters {contract.HP_NUM_DEPTHS} and {contract.HP_HELD_OUT} must be >= 1"
    try:
        float(values[contract.HP_ACCEPTANCE_FLOOR])
    except ValueError:
        return f"hyperparameter {contract.HP_ACCEPTANCE_FLOOR} must be a number"
    if values[contract.HP_SERVING_FORMAT] not in contract.SERVING_FORMATS:
        return (
            f"hyperparameter {contract.HP_SERVING_FORMAT} must be one of "
            f"{', '.join(contract.SERVING_FORMATS)}"
        )
    if values[contract.HP_REGENERATE] not in ("true", "false"):
        return f"hyperparameter {contract.HP_REGENERATE} must be true or false"
    if values[contract.HP_DATA_FORMAT] not in contract.DATA_FORMATS:
        return (
            f"hyperparameter {contract.HP_DATA_FORMAT} must be one of "
            f"{', '.join(contract.DATA_FORMATS)}"
        )
    if not values.get(contract.HP_MASK_TOKEN_ID, "0").isdigit():
        return f"hyperparameter {contract.HP_MASK_TOKEN_ID} must be a token id"
    return values


_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "system": "system"}


def _conversation(doc: object, data_format: str) -> list[dict[str, Any]] | None:
    """One record as chat messages (None: not a record of `data_format`)."""
    if not isinstance(doc, dict):
        return None
    if data_format == "openai-completions":
        prompt, completion = doc.get("prompt"), doc.get("completion")
        if not isinstance(prompt, str) or not isinstance(completion, str):
            return None
        return [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}]
    if data_format == "sharegpt":
        turns = doc.get("conversations")
        if not isinstance(turns, list) or not turns:
            return None
        return [
            {"role": _SHAREGPT_ROLES.get(str(t.get("from")), "user"), "content": t.get("value")}
            for t in turns
            if isinstance(t, dict)
        ]
    messages = doc.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    return [m for m in messages if isinstance(m, dict)]


def _records(files: Mapping[str, bytes], data_format: str) -> list[list[dict[str, Any]]] | str:
    """The conversations of the data channel's JSONL files, or what is wrong."""
    out = []
    for key in sorted(k for k in files if k.endswith((".jsonl", ".json"))):
        for number, line in enumerate(files[key].decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                return f"{key} line {number} is not JSON"
            conversation = _conversation(doc, data_format)
            if conversation is None:
                return f"{key} line {number} is not a record in the {data_format} format"
            out.append(conversation)
    return out if out else "the data channel holds no .jsonl records"


def _prompt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation up to its last assistant turn (what the target answers)."""
    end = len(messages)
    while end > 1 and messages[end - 1].get("role") == "assistant":
        end -= 1
    return messages[:end]


def _written_answer(messages: list[dict[str, Any]]) -> list[int]:
    """The record's own last answer in the emulator's vocabulary (longest match first;
    text the vocabulary lacks is skipped): the off-policy data a fine-tune's target
    would not produce."""
    text = next(
        (str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "assistant"),
        "",
    )
    by_length = sorted(range(len(VOCABULARY)), key=lambda i: -len(VOCABULARY[i]))
    ids: list[int] = []
    pos = 0
    while pos < len(text):
        hit = next((i for i in by_length if text.startswith(VOCABULARY[i], pos)), None)
        if hit is None:
            pos += 1
        else:
            ids.append(hit)
            pos += len(VOCABULARY[hit])
    return ids


def _answer(prompt: list[dict[str, Any]], max_tokens: int) -> list[int]:
    """What the emulated target generates for `prompt` (greedy, like the driver's)."""
    request = ChatRequest(prompt, "target", max_tokens, False, False)
    return token_ids(generate(request, max_tokens)[0])


def run(account_id: str, request: Mapping[str, Any]) -> DriverResult | DriverFailure:
    """The Training phase: read, regenerate, fit, measure (see the module's steps)."""
    hp = _hyperparameters(request)
    if isinstance(hp, str):
        return DriverFailure(hp, [f"peagle-train: {hp}"])
    channels = _channels(request)
    missing = [c for c in contract.CHANNELS if c not in channels]
    if missing:
        reason = (
            f"channel {missing[0]} missing: the job needs channels {', '.join(contract.CHANNELS)}"
        )
        return DriverFailure(reason, [f"peagle-train: {reason}"])
    target_files = _objects(account_id, channels[contract.TARGET_CHANNEL])
    _, target_prefix = _split(channels[contract.TARGET_CHANNEL])
    raw_config = target_files.get(target_prefix.rstrip("/") + "/config.json")
    if raw_config is None:
        reason = "the target channel has no config.json"
        return DriverFailure(reason, [f"peagle-train: {reason}"])
    data_files = _objects(account_id, channels[contract.DATA_CHANNEL])
    records = _records(data_files, hp[contract.HP_DATA_FORMAT])
    if isinstance(records, str):
        return DriverFailure(records, [f"peagle-train: {records}"])
    return _train(request, hp, json.loads(raw_config), data_files, records)


def _train(
    request: Mapping[str, Any],
    hp: dict[str, str],
    target_config: dict[str, Any],
    data_files: Mapping[str, bytes],
    records: list[list[dict[str, Any]]],
) -> DriverResult | DriverFailure:
    depth = int(hp[contract.HP_NUM_DEPTHS])
    max_tokens = int(hp[contract.HP_MAX_SEQ_LEN])
    random.Random(int(hp[contract.HP_SEED])).shuffle(records)
    held_out = min(int(hp[contract.HP_HELD_OUT]), max(1, len(records) // 5))
    rest = records[held_out:]
    cap = int(hp[contract.HP_MAX_SAMPLES])
    train = rest[:cap] if cap else rest
    if not train:
        reason = f"{len(records)} records leave none to train on after {held_out} held out"
        return DriverFailure(reason, [f"peagle-train: {reason}"])
    regenerate = hp[contract.HP_REGENERATE] == "true"
    answers = [_answer(_prompt(r), max_tokens) if regenerate else _written_answer(r) for r in train]
    start = TableDrafter.untrained(depth, int(hp[contract.HP_SEED]))
    drafter = TableDrafter.fit(answers, start)
    truth = [_answer(_prompt(r), max_tokens) for r in records[:held_out]]
    trained, untrained = speculate(drafter, truth, depth), speculate(start, truth, depth)
    log = [
        f"peagle-train: {len(train)} conversations, answers "
        + ("regenerated by the target (on-policy)" if regenerate else "as written (off-policy)"),
        f"peagle-train: fitted the emulator's table drafter for K={depth} on "
        f"{sum(len(a) for a in answers)} answer tokens",
        f"peagle-train: held-out acceptance per position on {held_out} prompts: "
        + ", ".join(f"{a:.2f}" for a in trained.per_position)
        + f" ({trained.mean_accepted_per_step:.2f} accepted tokens per step; untrained "
        f"{untrained.mean_accepted_per_step:.2f})",
    ]
    floor = float(hp[contract.HP_ACCEPTANCE_FLOOR])
    below = contract.floor_reason(
        trained.mean_accepted_per_step, tuple(trained.per_position), trained.drafts, floor
    )
    if below is not None:
        return DriverFailure(below, [*log, f"peagle-train: {below}"])
    metadata = _metadata(hp, target_config, trained, held_out, data_files)
    files = _files(drafter, hp, target_config, metadata)
    uri = contract.drafter_uri(
        request["OutputDataConfig"]["S3OutputPath"], request["TrainingJobName"]
    )
    return DriverResult(uri, files, trained, untrained, log)


def _metadata(
    hp: Mapping[str, str],
    target_config: Mapping[str, Any],
    trained: SpecCounts,
    held_out: int,
    data_files: Mapping[str, bytes],
) -> contract.DrafterMetadata:
    """The emulator's drafter's metadata (the file the SDK reads back)."""
    import moto

    digest = hashlib.sha256()
    for key in sorted(data_files):
        digest.update(data_files[key])
    return contract.DrafterMetadata(
        schema_version=contract.METADATA_SCHEMA_VERSION,
        serving_format=hp[contract.HP_SERVING_FORMAT],
        num_depths=int(hp[contract.HP_NUM_DEPTHS]),
        num_layers=int(hp[contract.HP_NUM_LAYERS]),
        mask_token_id=mask_token_id(hp, target_config),
        draft_vocab_size=int(hp[contract.HP_DRAFT_VOCAB]),
        target_model_type=str(target_config.get("model_type", "")),
        target_hidden_size=int(target_config.get("hidden_size", 0)),
        aux_layer_ids=tuple(aux_layer_ids(target_config)),
        acceptance_per_position=tuple(round(a, 4) for a in trained.per_position),
        mean_accepted_per_step=round(trained.mean_accepted_per_step, 4),
        held_out_prompts=held_out,
        data_sha256=digest.hexdigest(),
        versions={"drafter": "peagle-emulator table", "moto": moto.__version__},
    )


def mask_token_id(hp: Mapping[str, str], target_config: Mapping[str, Any]) -> int:
    """The id the job was given, else the target's last vocabulary row (an unused one
    in the emulated target, as speculators adds `<|MASK|>` there)."""
    given = hp.get(contract.HP_MASK_TOKEN_ID)
    return int(given) if given else int(target_config.get("vocab_size", len(VOCABULARY))) - 1


def aux_layer_ids(target_config: Mapping[str, Any]) -> list[int]:
    """The target layers an EAGLE-3 head reads by vLLM's default (2, L // 2, L - 3;
    vllm 0.30.0 model_executor/models/interfaces.py). The table reads none; the
    metadata names what a P-EAGLE head for this target would."""
    layers = int(target_config.get("num_hidden_layers", 4))
    return [max(0, i) for i in (2, layers // 2, layers - 3)]


def _files(
    drafter: TableDrafter,
    hp: Mapping[str, str],
    target_config: Mapping[str, Any],
    metadata: contract.DrafterMetadata,
) -> dict[str, bytes]:
    draft_vocab = int(hp[contract.HP_DRAFT_VOCAB])
    config = drafter_config(
        drafter,
        serving_format=hp[contract.HP_SERVING_FORMAT],
        target_config=target_config,
        draft_vocab_size=draft_vocab,
        num_layers=int(hp[contract.HP_NUM_LAYERS]),
        mask_token_id=metadata.mask_token_id,
        aux_layer_ids=metadata.aux_layer_ids,
    )
    files = drafter_files(drafter, config, draft_vocab_size=draft_vocab)
    files[contract.METADATA_FILE] = contract.metadata_to_json(metadata).encode()
    return files


def upload(account_id: str, request: Mapping[str, Any], result: DriverResult) -> str | None:
    """The Uploading phase: the drafter's files under its S3 prefix (encrypted with the
    job's OutputDataConfig.KmsKeyId when it names one); the failure, if any."""
    from moto.s3.models import s3_backends

    backend = s3_backends[account_id]["global"]
    bucket, prefix = _split(result.drafter_uri)
    kms = request["OutputDataConfig"].get("KmsKeyId")
    try:
        backend.get_bucket(bucket)
    except Exception:
        return f"ClientError: the output bucket {bucket} does not exist"
    for name, body in result.files.items():
        backend.put_object(
            bucket,
            prefix + name,
            body,
            encryption="aws:kms" if kms else None,
            kms_key_id=kms,
        )
    return None
