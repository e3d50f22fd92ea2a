"""Tiny models the real vLLM engine serves on a CPU in seconds.

- the target: a Llama (`LlamaForCausalLM`): hidden 128, 4 layers, 4 heads / 2 KV heads,
  head_dim 32 (a head size vLLM's CPU attention supports), vocabulary 1024, float32,
  with a word-level `tokenizer.json` and a chat template;
- a P-EAGLE drafter and an EAGLE-3 drafter in vLLM 0.30.0's `LlamaForCausalLMEagle3`
  shape (`model_executor/models/llama_eagle3.py`): one `midlayer` whose attention takes
  2 x hidden (token embedding + hidden state), `fc` over the 3 auxiliary hidden states
  of the target (`eagle_config.eagle_aux_hidden_state_layer_ids`), a 512-token draft
  vocabulary mapped to the target's by `d2t` (and `t2d`); the P-EAGLE one also has the
  mask-token id (`ptd_token_id`) and the learned `mask_hidden` [1, 3 x hidden] that
  parallel drafting needs.

Weights are random (seeded): such a pair accepts few draft tokens. The "oracle" pair has
every final-norm weight at zero, so both models' logits are all zero and both always
pick token 0: every draft token is accepted, which makes acceptance exactly checkable.

The "rule" target (`write_rule_target`) has the same shape, but its greedy next token is
a fixed function of the current token (`rule_next`: an affine permutation of the draft
vocabulary's ids): every attention output and MLP down-projection is zero, so each
position's hidden state is its token's embedding, and row j of `lm_head` is the sum of
the embeddings of the tokens the rule sends to j. A drafter can learn that rule from the
target's hidden states (the CPU proof of training, scripts/local_engine/train_tiny.py).

Standard library only: the safetensors files are written directly (JSON header + raw
little-endian data), so any Python can make the models.
"""

from __future__ import annotations

import argparse
import array
import json
import random
import struct
import sys
from pathlib import Path
from typing import Final

HIDDEN: Final = 128
INTERMEDIATE: Final = 256
LAYERS: Final = 4
HEADS: Final = 4
KV_HEADS: Final = 2
HEAD_DIM: Final = 32
VOCAB: Final = 1024
DRAFT_VOCAB: Final = 512
MAX_LEN: Final = 1024
AUX_LAYERS: Final = (1, 2, 3)
# Token ids: words below SPECIAL_START; the specials at the top of the vocabulary.
SPECIALS: Final = ("<unk>", "<s>", "</s>", "<mask>", "<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_START: Final = VOCAB - len(SPECIALS)
UNK, BOS, EOS, MASK = range(SPECIAL_START, SPECIAL_START + 4)
CHAT_TEMPLATE: Final = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SYLLABLES: Final = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "be", "do", "fu", "gi")

Tensor = tuple[str, tuple[int, ...], bytes]


def words() -> list[str]:
    """SPECIAL_START pronounceable, distinct words (token 0 is 'the')."""
    out = ["the"]
    for a in SYLLABLES:
        for b in SYLLABLES:
            for c in ("", *SYLLABLES):
                out.append(a + b + c)
    return out[:SPECIAL_START]


def _f32(values: list[float], shape: tuple[int, ...]) -> Tensor:
    return "F32", shape, array.array("f", values).tobytes()


def _random(rng: random.Random, shape: tuple[int, ...], scale: float) -> Tensor:
    n = 1
    for d in shape:
        n *= d
    return _f32([rng.gauss(0.0, scale) for _ in range(n)], shape)


def _ones(n: int, value: float = 1.0) -> Tensor:
    return _f32([value] * n, (n,))


def write_safetensors(path: Path, tensors: dict[str, Tensor]) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, data) in tensors.items():
        end = offset + len(data)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, end]}
        offset = end
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for _dtype, _shape, data in tensors.values():
            f.write(data)


def _attention_and_mlp(
    rng: random.Random, prefix: str, q_in: int, scale: float
) -> dict[str, Tensor]:
    return {
        f"{prefix}.self_attn.q_proj.weight": _random(rng, (HEADS * HEAD_DIM, q_in), scale),
        f"{prefix}.self_attn.k_proj.weight": _random(rng, (KV_HEADS * HEAD_DIM, q_in), scale),
        f"{prefix}.self_attn.v_proj.weight": _random(rng, (KV_HEADS * HEAD_DIM, q_in), scale),
        f"{prefix}.self_attn.o_proj.weight": _random(rng, (HIDDEN, HEADS * HEAD_DIM), scale),
        f"{prefix}.mlp.gate_proj.weight": _random(rng, (INTERMEDIATE, HIDDEN), scale),
        f"{prefix}.mlp.up_proj.weight": _random(rng, (INTERMEDIATE, HIDDEN), scale),
        f"{prefix}.mlp.down_proj.weight": _random(rng, (HIDDEN, INTERMEDIATE), scale),
        f"{prefix}.input_layernorm.weight": _ones(HIDDEN),
        f"{prefix}.post_attention_layernorm.weight": _ones(HIDDEN),
    }


def _llama_config(**extra: object) -> dict[str, object]:
    return {
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "vocab_size": VOCAB,
        "max_position_embeddings": MAX_LEN,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "torch_dtype": "float32",
        **extra,
    }


def _tokenizer_files(out: Path) -> None:
    vocab = {w: i for i, w in enumerate(words())}
    vocab.update({s: SPECIAL_START + i for i, s in enumerate(SPECIALS)})
    added = [
        {
            "id": SPECIAL_START + i,
            "content": s,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, s in enumerate(SPECIALS)
    ]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }
    (out / "tokenizer.json").write_text(json.dumps(tokenizer))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "model_max_length": MAX_LEN,
                "chat_template": CHAT_TEMPLATE,
            }
        )
    )


def write_target(out: Path, *, oracle: bool = False, seed: int = 0) -> Path:
    """The tiny Llama target (config, tokenizer, weights) in `out`."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    scale = HIDDEN**-0.5
    tensors: dict[str, Tensor] = {"model.embed_tokens.weight": _random(rng, (VOCAB, HIDDEN), 1.0)}
    for layer in range(LAYERS):
        tensors.update(_attention_and_mlp(rng, f"model.layers.{layer}", HIDDEN, scale))
    tensors["model.norm.weight"] = _ones(HIDDEN, 0.0 if oracle else 1.0)
    tensors["lm_head.weight"] = _random(rng, (VOCAB, HIDDEN), 1.0)
    write_safetensors(out / "model.safetensors", tensors)
    config = _llama_config(architectures=["LlamaForCausalLM"], num_hidden_layers=LAYERS)
    (out / "config.json").write_text(json.dumps(config, indent=1))
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": BOS, "eos_token_id": EOS})
    )
    _tokenizer_files(out)
    return out


RULE_MULTIPLIER: Final = 5  # odd: an affine map of Z_DRAFT_VOCAB is then a permutation
RULE_OFFSET: Final = 1


def rule_next(token: int) -> int:
    """The rule target's greedy next token after `token` (always a draft-vocabulary id)."""
    return (RULE_MULTIPLIER * token + RULE_OFFSET) % DRAFT_VOCAB


def _rule_lm_head(embed: list[float]) -> list[float]:
    """Row j: the sum of the embeddings of every token t with rule_next(t) == j (rows
    outside the draft vocabulary stay zero, so the target never emits those ids)."""
    rows = [0.0] * (VOCAB * HIDDEN)
    for token in range(VOCAB):
        base = rule_next(token) * HIDDEN
        for i in range(HIDDEN):
            rows[base + i] += embed[token * HIDDEN + i]
    return rows


def rule_margin(embed: list[float], lm_head: list[float]) -> float:
    """The smallest gap, over all tokens, between the rule's logit and the best other
    one (final norm ~ identity: embeddings have unit RMS); > 0 means greedy follows the rule."""
    worst = float("inf")
    for token in range(VOCAB):
        e = embed[token * HIDDEN : (token + 1) * HIDDEN]
        logits = [
            sum(a * b for a, b in zip(e, lm_head[j * HIDDEN : (j + 1) * HIDDEN], strict=True))
            for j in range(VOCAB)
        ]
        want = rule_next(token)
        other = max(v for j, v in enumerate(logits) if j != want)
        worst = min(worst, logits[want] - other)
    return worst


def write_rule_target(out: Path, *, seed: int = 0) -> Path:
    """The tiny Llama whose greedy next token is `rule_next(current token)`, in `out`."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    scale = HIDDEN**-0.5
    embed = [rng.gauss(0.0, 1.0) for _ in range(VOCAB * HIDDEN)]
    tensors: dict[str, Tensor] = {"model.embed_tokens.weight": _f32(embed, (VOCAB, HIDDEN))}
    for layer in range(LAYERS):
        prefix = f"model.layers.{layer}"
        block = _attention_and_mlp(rng, prefix, HIDDEN, scale)
        # Zero outputs: every layer passes its input through unchanged.
        block[f"{prefix}.self_attn.o_proj.weight"] = _f32(
            [0.0] * (HIDDEN * HEADS * HEAD_DIM), (HIDDEN, HEADS * HEAD_DIM)
        )
        block[f"{prefix}.mlp.down_proj.weight"] = _f32(
            [0.0] * (HIDDEN * INTERMEDIATE), (HIDDEN, INTERMEDIATE)
        )
        tensors.update(block)
    tensors["model.norm.weight"] = _ones(HIDDEN)
    tensors["lm_head.weight"] = _f32(_rule_lm_head(embed), (VOCAB, HIDDEN))
    write_safetensors(out / "model.safetensors", tensors)
    config = _llama_config(architectures=["LlamaForCausalLM"], num_hidden_layers=LAYERS)
    (out / "config.json").write_text(json.dumps(config, indent=1))
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": BOS, "eos_token_id": EOS})
    )
    _tokenizer_files(out)
    return out


def drafter_tensors(*, parallel: bool, oracle: bool = False, seed: int = 1) -> dict[str, Tensor]:
    """The drafter's weights; `mask_hidden` only for parallel drafting."""
    rng = random.Random(seed)
    scale = HIDDEN**-0.5
    aux = len(AUX_LAYERS)
    tensors = _attention_and_mlp(rng, "midlayer", 2 * HIDDEN, scale)
    tensors["midlayer.hidden_norm.weight"] = _ones(HIDDEN)
    tensors["fc.weight"] = _random(rng, (HIDDEN, aux * HIDDEN), (aux * HIDDEN) ** -0.5)
    tensors["norm.weight"] = _ones(HIDDEN, 0.0 if oracle else 1.0)
    tensors["lm_head.weight"] = _random(rng, (DRAFT_VOCAB, HIDDEN), 1.0)
    # Draft id i is target id i + d2t[i]: the first DRAFT_VOCAB target tokens.
    tensors["d2t"] = ("I64", (DRAFT_VOCAB,), array.array("q", [0] * DRAFT_VOCAB).tobytes())
    t2d = bytes(1 if i < DRAFT_VOCAB else 0 for i in range(VOCAB))
    tensors["t2d"] = ("BOOL", (VOCAB,), t2d)
    if parallel:
        tensors["mask_hidden"] = _random(rng, (1, aux * HIDDEN), 1.0)
    return tensors


def drafter_config(*, parallel: bool) -> dict[str, object]:
    config = _llama_config(
        architectures=["LlamaForCausalLMEagle3"],
        num_hidden_layers=1,
        draft_vocab_size=DRAFT_VOCAB,
        target_hidden_size=HIDDEN,
        eagle_config={
            "eagle_aux_hidden_state_layer_ids": list(AUX_LAYERS),
            "use_aux_hidden_state": True,
        },
    )
    if parallel:
        config["ptd_token_id"] = MASK
    return config


def write_drafter(out: Path, *, parallel: bool, oracle: bool = False, seed: int = 1) -> Path:
    """A P-EAGLE (`parallel`) or EAGLE-3 drafter for the target, in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    tensors = drafter_tensors(parallel=parallel, oracle=oracle, seed=seed)
    write_safetensors(out / "model.safetensors", tensors)
    (out / "config.json").write_text(json.dumps(drafter_config(parallel=parallel), indent=1))
    return out


def write_all(root: Path, *, oracle: bool) -> dict[str, Path]:
    """Target, P-EAGLE drafter and EAGLE-3 drafter under `root` (one pair kind)."""
    return {
        "target": write_target(root / "target", oracle=oracle),
        "p-eagle": write_drafter(root / "p-eagle", parallel=True, oracle=oracle),
        "eagle3": write_drafter(root / "eagle3", parallel=False, oracle=oracle),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="directory to write target/, p-eagle/, eagle3/")
    parser.add_argument("--oracle", action="store_true", help="the always-accepting pair")
    ns = parser.parse_args(argv)
    for name, path in write_all(ns.out, oracle=ns.oracle).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
