"""The emulator's drafter: a table that drafts the next K tokens, fitted on the target's answers.

This is not the P-EAGLE network. The emulator has no torch and its target is no neural
network: `chat.generate` writes answers from the emulator's 32-entry vocabulary by a
fixed rule. What the emulator can do honestly is train *something* during a training
job and let its serving measure it: a table with one row per draft position k (1..K)
that maps the last token of the context to the token it predicts k places ahead, as a
P-EAGLE head predicts K tokens in parallel from one context. Fitting counts, on the
answers the target regenerated for the training prompts, which token follows each
context token at each distance and keeps the most frequent one.

Acceptance is measured as vLLM counts it: each step the drafter proposes K tokens from
the last emitted token; the target keeps the longest prefix that matches what it
generates, plus its own next token; position i is accepted when the first i drafts
were. The same measurement runs on held-out prompts in the training job and on every
request an endpoint serving the drafter answers (moto_ext), so what `peagle bench`
reads is what the table gives against the emulated target, not a number in a record.

On disk the drafter looks like the format the job asked for (config.json and
model.safetensors with the tensors `peagle doctor` looks for, zero-filled since only
their headers are read) plus the table itself as the tensor `TABLE_TENSOR`, and a
`peagle_emulator` block in config.json that says what it is.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from peagle_local.emulator.chat import VOCABULARY

TABLE_TENSOR: Final = "peagle_emulator.draft_table"
EMULATOR_KEY: Final = "peagle_emulator"
NO_TOKEN: Final = -1
"""A table entry with no prediction (a position past the depth trained)."""
WEIGHTS_FILE: Final = "model.safetensors"
CONFIG_FILE: Final = "config.json"


@dataclass(frozen=True)
class TableDrafter:
    """`table[k][t]`: the token predicted k+1 places after context token t."""

    table: tuple[tuple[int, ...], ...]

    @property
    def depth(self) -> int:
        return len(self.table)

    @classmethod
    def untrained(cls, depth: int, seed: int = 0) -> TableDrafter:
        """What a head drafts before training: an arbitrary token per context."""
        rng = random.Random(seed)
        size = len(VOCABULARY)
        return cls(tuple(tuple(rng.randrange(size) for _ in range(size)) for _ in range(depth)))

    @classmethod
    def fit(cls, answers: Iterable[Sequence[int]], start: TableDrafter) -> TableDrafter:
        """The table `start` becomes on `answers` (token ids): each context token's most
        frequent follower at each distance; contexts never seen keep `start`'s entry."""
        size = len(VOCABULARY)
        counts = [[[0] * size for _ in range(size)] for _ in range(start.depth)]
        for answer in answers:
            for i, token in enumerate(answer):
                for k in range(min(start.depth, len(answer) - 1 - i)):
                    counts[k][token][answer[i + k + 1]] += 1
        rows = []
        for k in range(start.depth):
            row = []
            for context in range(size):
                seen = counts[k][context]
                best = max(range(size), key=lambda t: (seen[t], -t))
                row.append(best if seen[best] else start.table[k][context])
            rows.append(tuple(row))
        return cls(tuple(rows))

    def propose(self, last: int, k: int) -> list[int]:
        """K drafts from the context's last token (positions past the depth: none)."""
        return [self.table[i][last] if i < self.depth else NO_TOKEN for i in range(k)]


@dataclass(frozen=True)
class SpecCounts:
    """vLLM's speculative-decoding counters over some answers."""

    k: int
    drafts: int
    accepted_per_position: tuple[int, ...]

    @property
    def draft_tokens(self) -> int:
        return self.drafts * self.k

    @property
    def accepted(self) -> int:
        return sum(self.accepted_per_position)

    @property
    def per_position(self) -> tuple[float, ...]:
        """Acceptance rate of each position (accepted / drafts)."""
        return tuple(a / self.drafts if self.drafts else 0.0 for a in self.accepted_per_position)

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.draft_tokens if self.drafts else 0.0

    @property
    def mean_accepted_per_step(self) -> float:
        """Accepted draft tokens per step (vLLM's mean acceptance length minus 1)."""
        return self.accepted / self.drafts if self.drafts else 0.0


def speculate(drafter: TableDrafter, answers: Iterable[Sequence[int]], k: int) -> SpecCounts:
    """Count what speculative decoding with `drafter` at K=`k` accepts on `answers` (the
    target's tokens): the first token comes from prefill, then each step drafts K, keeps
    the matching prefix and adds the target's own token."""
    drafts = 0
    accepted = [0] * k
    for answer in answers:
        pos = 0
        while pos < len(answer) - 1:
            proposal = drafter.propose(answer[pos], k)
            matched = 0
            while (
                matched < k
                and pos + matched + 1 < len(answer)
                and proposal[matched] == answer[pos + matched + 1]
            ):
                accepted[matched] += 1
                matched += 1
            drafts += 1
            pos += matched + 1
    return SpecCounts(k, drafts, tuple(accepted))


# --- files ---------------------------------------------------------------------------
_DTYPE_BYTES = {"I64": 8, "BF16": 2}


def _safetensors(tensors: Sequence[tuple[str, str, tuple[int, ...], bytes | None]]) -> bytes:
    """A safetensors file; a tensor whose data is None is zero-filled."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, dtype, shape, data in tensors:
        count = 1
        for d in shape:
            count *= d
        size = count * _DTYPE_BYTES[dtype]
        blob = data if data is not None else b"\0" * size
        if len(blob) != size:
            raise ValueError(f"tensor {name}: {len(blob)} bytes for shape {list(shape)}")
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        blobs.append(blob)
        offset += size
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(blobs)


def _table_tensor(data: bytes) -> tuple[tuple[int, ...], ...] | None:
    """The table tensor of a safetensors file, None when it has none."""
    if len(data) < 8:
        return None
    (length,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8 : 8 + length])
    except ValueError:
        return None
    entry = header.get(TABLE_TENSOR) if isinstance(header, dict) else None
    if not isinstance(entry, dict) or entry.get("dtype") != "I64":
        return None
    depth, size = entry["shape"]
    start, end = entry["data_offsets"]
    raw = data[8 + length + start : 8 + length + end]
    values = struct.unpack(f"<{depth * size}q", raw)
    return tuple(tuple(values[k * size : (k + 1) * size]) for k in range(depth))


def drafter_config(
    drafter: TableDrafter,
    *,
    serving_format: str,
    target_config: Mapping[str, Any],
    draft_vocab_size: int,
    num_layers: int,
    mask_token_id: int,
    aux_layer_ids: Sequence[int] = (),
) -> dict[str, Any]:
    """config.json in the keys of `serving_format` (what vLLM and `peagle doctor` read)."""
    hidden = int(target_config.get("hidden_size", 0))
    vocab = int(target_config.get("vocab_size", len(VOCABULARY)))
    marker = {
        "drafter": "next-token table (the emulator's stand-in, not a P-EAGLE network)",
        "table_tensor": TABLE_TENSOR,
        "vocabulary": "the emulator's chat vocabulary",
    }
    if serving_format == "speculators":
        return {
            "speculators_model_type": "peagle",
            "transformer_layer_config": {"hidden_size": hidden, "num_hidden_layers": num_layers},
            "draft_vocab_size": draft_vocab_size,
            "mask_token_id": mask_token_id,
            "eagle_aux_hidden_state_layer_ids": list(aux_layer_ids),
            "speculators_config": {"proposal_methods": [{"speculative_tokens": drafter.depth}]},
            EMULATOR_KEY: marker,
        }
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": hidden,
        "target_hidden_size": hidden,
        "num_hidden_layers": num_layers,
        "vocab_size": vocab,
        "draft_vocab_size": draft_vocab_size,
        "ptd_token_id": mask_token_id,
        EMULATOR_KEY: marker,
    }


def drafter_files(
    drafter: TableDrafter, config: Mapping[str, Any], *, draft_vocab_size: int
) -> dict[str, bytes]:
    """config.json and model.safetensors: the table, and the head's tensors the doctor's
    header rules look for (zero-filled)."""
    hidden = int(
        config.get("target_hidden_size")
        or config.get("transformer_layer_config", {}).get("hidden_size")
        or 0
    )
    size = len(VOCABULARY)
    flat = [token for row in drafter.table for token in row]
    weights = _safetensors(
        [
            ("fc.weight", "BF16", (hidden, 3 * hidden), None),
            ("d2t", "I64", (draft_vocab_size,), None),
            ("mask_hidden", "BF16", (1, 3 * hidden), None),
            (TABLE_TENSOR, "I64", (drafter.depth, size), struct.pack(f"<{len(flat)}q", *flat)),
        ]
    )
    return {CONFIG_FILE: json.dumps(config, indent=2).encode(), WEIGHTS_FILE: weights}


def read_drafter(config_text: bytes, weights: bytes) -> TableDrafter | None:
    """The emulator's drafter in these files; None for any other checkpoint."""
    try:
        config = json.loads(config_text)
    except ValueError:
        return None
    if not isinstance(config, dict) or EMULATOR_KEY not in config:
        return None
    table = _table_tensor(weights)
    if table is None or any(len(row) != len(VOCABULARY) for row in table):
        return None
    return TableDrafter(table)


# --- serving -------------------------------------------------------------------------
_LOADED: dict[tuple[str, str, str], TableDrafter | None] = {}
"""Drafters read from the emulator's S3, by (bucket, prefix, ETags of the two files)."""


def _s3_files(account_id: str, uri: str) -> tuple[str, bytes, bytes] | None:
    """(etags, config.json, model.safetensors) under an S3 prefix of the emulator."""
    from moto.s3.models import s3_backends

    bucket_name, _, prefix = uri.removeprefix("s3://").partition("/")
    try:
        bucket = s3_backends[account_id]["global"].get_bucket(bucket_name)
    except Exception:
        return None
    config = bucket.keys.get(prefix + CONFIG_FILE)
    weights = bucket.keys.get(prefix + WEIGHTS_FILE)
    if config is None or weights is None:
        return None
    return f"{config.etag}/{weights.etag}", config.value, weights.value


def endpoint_drafter(
    account_id: str, region: str, endpoint_name: str
) -> tuple[TableDrafter, int] | None:
    """The emulator's drafter an endpoint's (first) production variant serves, with the
    K it drafts (SM_VLLM_SPECULATIVE_CONFIG); None for any other model."""
    from moto.sagemaker.models import sagemaker_backends

    backend = sagemaker_backends[account_id][region]
    endpoint = backend.endpoints.get(endpoint_name)
    config = backend.endpoint_configs.get(getattr(endpoint, "endpoint_config_name", ""))
    if config is None or not config.production_variants:
        return None
    model = backend._models.get(str(config.production_variants[0].get("ModelName", "")))
    container = (model.primary_container or {}) if model is not None else {}
    sources = container.get("AdditionalModelDataSources") or []
    env = container.get("Environment") or {}
    try:
        k = int(json.loads(env.get("SM_VLLM_SPECULATIVE_CONFIG", "{}"))["num_speculative_tokens"])
    except (ValueError, TypeError, KeyError):
        return None
    uri = str(sources[0].get("S3DataSource", {}).get("S3Uri", "")) if sources else ""
    found = _s3_files(account_id, uri) if uri and k >= 1 else None
    if found is None:
        return None
    key = (account_id, uri, found[0])
    if key not in _LOADED:
        _LOADED[key] = read_drafter(found[1], found[2])
    drafter = _LOADED[key]
    return (drafter, k) if drafter is not None else None
