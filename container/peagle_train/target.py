"""What the driver checks in the target's files before any GPU work (standard library).

Three of speculators' silent failures are decided by the target alone:
- the chat template: prepare-data renders every conversation through it; without one
  there is nothing to mask the assistant turns by;
- the target layer ids: speculators' default [2, n//2, n-3] repeats or goes negative
  for small n, and ids past num_hidden_layers read hidden states that do not exist;
- the mask token: when the tokenizer declares none and its tokens fill every embedding
  row, speculators (train/utils.py, resolve_mask_token_id) falls back to the pad, eos or
  unk token, so a masked slot looks like a real token to the drafter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peagle_train.failures import DriverError


@dataclass(frozen=True)
class TargetInfo:
    model_type: str
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int
    chat_template: bool
    token_ids: frozenset[int]
    """Every id the tokenizer can produce (its vocabulary and added tokens)."""
    special_ids: dict[str, int]
    """bos/eos/pad/unk/mask token ids the tokenizer declares."""


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise DriverError(f"target: cannot read {path.name}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise DriverError(f"target: {path.name} is not JSON ({e.msg})") from None
    if not isinstance(value, dict):
        raise DriverError(f"target: {path.name} is not a JSON object")
    return value


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    # Multimodal targets keep the decoder's fields under text_config (speculators reads
    # it the same way in create_transformer_layer_config).
    inner = config.get("text_config")
    return inner if isinstance(inner, dict) else config


def _positive(config: dict[str, Any], name: str) -> int:
    value = config.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise DriverError(f"target: config.json {name} is {value!r}, not a positive integer")
    return value


def _token_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _tokenizer(target: Path) -> tuple[dict[str, int], dict[str, Any]]:
    """(token text -> id over vocabulary and added tokens, tokenizer_config)."""
    tok_path = target / "tokenizer.json"
    if not tok_path.exists():
        raise DriverError("target: tokenizer.json is missing (the data is tokenized with it)")
    tokenizer = _json(tok_path)
    ids: dict[str, int] = {}
    vocab = (tokenizer.get("model") or {}).get("vocab")
    if isinstance(vocab, dict):
        ids.update({k: v for k, v in vocab.items() if isinstance(v, int)})
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        ids.update({p[0]: i for i, p in enumerate(vocab) if isinstance(p, list) and p})
    for added in tokenizer.get("added_tokens") or []:
        if isinstance(added, dict) and isinstance(added.get("id"), int):
            ids[str(added.get("content"))] = added["id"]
    cfg_path = target / "tokenizer_config.json"
    return ids, (_json(cfg_path) if cfg_path.exists() else {})


def inspect_target(target: Path) -> TargetInfo:
    config = _text_config(_json(target / "config.json"))
    ids, tok_cfg = _tokenizer(target)
    template = bool(tok_cfg.get("chat_template")) or any(
        (target / name).exists() for name in ("chat_template.jinja", "chat_template.json")
    )
    special: dict[str, int] = {}
    for role in ("bos", "eos", "pad", "unk", "mask"):
        text = _token_text(tok_cfg.get(f"{role}_token"))
        if text is not None and text in ids:
            special[role] = ids[text]
    return TargetInfo(
        model_type=str(config.get("model_type", "")),
        hidden_size=_positive(config, "hidden_size"),
        num_hidden_layers=_positive(config, "num_hidden_layers"),
        vocab_size=_positive(config, "vocab_size"),
        chat_template=template,
        token_ids=frozenset(ids.values()),
        special_ids=special,
    )


def require_chat_template(info: TargetInfo) -> None:
    if not info.chat_template:
        raise DriverError(
            "chat template: the target has none (tokenizer_config.json chat_template or "
            "chat_template.jinja); prepare-data masks the assistant turns by rendering "
            "each conversation with it, so add the template the model was tuned with"
        )


def resolve_layer_ids(info: TargetInfo, explicit: tuple[int, ...] | None) -> tuple[int, ...]:
    """The auxiliary layers the drafter reads (speculators' resolve_target_layer_ids rule:
    distinct, within [0, num_hidden_layers]); the extraction server adds the last one."""
    n = info.num_hidden_layers
    ids = explicit if explicit is not None else (2, n // 2, n - 3)
    if min(ids) < 0 or max(ids) > n or len(set(ids)) != len(ids):
        where = "target_layer_ids" if explicit is not None else "the default [2, n//2, n-3]"
        raise DriverError(
            f"target layer ids: {list(ids)} from {where} are not distinct layers within "
            f"0..{n} for a target with num_hidden_layers={n}; set the hyperparameter "
            "target_layer_ids"
        )
    return ids


def _explicit_mask(info: TargetInfo, mask_id: int) -> int:
    """A mask id the spec states: an embedding row that is the tokenizer's own mask token
    or that no token uses."""
    if mask_id >= info.vocab_size:
        raise DriverError(
            f"mask token: mask_token_id {mask_id} is past the target's vocab_size "
            f"{info.vocab_size} (no embedding row)"
        )
    if mask_id in info.token_ids and info.special_ids.get("mask") != mask_id:
        role = next((r for r, i in info.special_ids.items() if i == mask_id), None)
        what = f"the {role} token" if role else "a token of the tokenizer"
        raise DriverError(
            f"mask token: mask_token_id {mask_id} is {what}; the drafter could not tell a "
            "masked slot from it (choose an unused row or the tokenizer's mask token)"
        )
    return mask_id


def resolve_mask_token(info: TargetInfo, explicit: int | None = None) -> int:
    """The mask id passed to the trainer explicitly, so speculators never falls back."""
    if explicit is not None:
        return _explicit_mask(info, explicit)
    declared = info.special_ids.get("mask")
    if declared is not None:
        clashes = [r for r, i in info.special_ids.items() if r != "mask" and i == declared]
        if clashes or declared >= info.vocab_size:
            why = f"is also the {clashes[0]} token" if clashes else "is past vocab_size"
            raise DriverError(
                f"mask token: the tokenizer's mask_token (id {declared}) {why} "
                f"(vocab_size {info.vocab_size}); declare a dedicated unused token"
            )
        return declared
    free = max(info.token_ids, default=-1) + 1
    if free < info.vocab_size and free not in info.token_ids:
        return free  # an embedding row no token uses (speculators adds <|MASK|> there)
    raise DriverError(
        f"mask token: the tokenizer declares no mask_token and its tokens fill all "
        f"{info.vocab_size} embedding rows, so speculators would reuse the pad/eos/unk "
        "token as the mask and the drafter could not tell a masked slot from it; declare "
        "an unused special token as mask_token in tokenizer_config.json"
    )
