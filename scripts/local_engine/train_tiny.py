"""The CPU proof of training: a P-EAGLE head for the rule target, trained with
speculators' own model class and loss, saved as speculators saves it.

Runs in the environment scripts/train-env.sh builds (speculators 0.9.0, CPU torch,
transformers 5.19); `python -m local_engine.train_tiny TARGET OUT` with scripts/ on
PYTHONPATH. What is speculators' and what is this file's:

- speculators': `PEagleDraftModel.from_training_args` (the head, its vocabulary mapping
  and the verifier's embeddings, lm_head and norm copied in), `shift_batch` (the
  alignment its trainer applies to every P-EAGLE sample), the model's forward (COD
  sampling over `num_depths`, the parallel-drafting attention mask, and the loss:
  `resolve_loss_config("kl_div", "eager")`, KL to the verifier's distribution), and
  `save_pretrained` (config.json + model.safetensors in speculators' format).
- this file's: the loop its `Trainer` would run (it raises "No accelerator found" on a
  CPU: speculators/train/distributed.py): AdamW, gradient clipping at 1.0 as its trainer
  does, one packed sequence per step with `document_ids` as its collate function builds
  them; and the data its pipeline would get from vLLM: the target's own greedy answers
  (on-policy) and the hidden states of its auxiliary layers, computed here with the same
  weights through transformers on CPU (aux layer i = the input of decoder layer i, as
  vLLM collects it; the last hidden state before the final norm, which the model's
  `verifier_norm` applies).

Every knob is pinned in `Knobs` and written to OUT/train-summary.json with the loss and
per-depth accuracy speculators' metrics report, the steps and the seconds they took.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from local_engine import tiny_models

SUMMARY_FILE = "train-summary.json"
CHECKPOINT_SUBDIR = "checkpoint"
UNTRAINED_SUBDIR = "untrained"


@dataclass(frozen=True)
class Knobs:
    """Every training choice, pinned (speculators' defaults differ from its docs)."""

    num_layers: int = 1
    num_depths: int = 3  # K trained; vLLM serves the head with K speculative tokens
    draft_vocab_size: int = tiny_models.DRAFT_VOCAB
    aux_layer_ids: tuple[int, ...] = tiny_models.AUX_LAYERS
    mask_token_id: int = tiny_models.MASK
    learning_rate: float = 3e-3
    steps: int = 300
    seed: int = 0
    samples: int = 64
    prompt_words: tuple[int, int] = (3, 9)  # uniform length range of a prompt
    answer_tokens: int = 40
    pack_tokens: int = 256  # tokens per training step (samples packed, as speculators does)
    down_sample_ratio: float = 0.7
    down_sample_ratio_min: float = 0.2
    attn_implementation: str = "eager"  # flex attention needs torch.compile on CPU
    loss: str = "kl_div"
    loss_implementation: str = "eager"  # "fused" is a Triton kernel (GPU only)


def prompts(count: int, seed: int, lengths: tuple[int, int]) -> list[str]:
    """`count` prompts of random words (the tokenizer's word-level vocabulary)."""
    rng = random.Random(seed)
    vocabulary = tiny_models.words()
    return [
        " ".join(rng.choice(vocabulary) for _ in range(rng.randint(*lengths))) for _ in range(count)
    ]


def _generate(model: Any, torch: Any, ids: list[int], count: int) -> list[int]:
    """The target's greedy continuation (on-policy answers)."""
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=count,
            min_new_tokens=count,
            do_sample=False,
        )
    return [int(t) for t in out[0, len(ids) :]]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build_samples(target: Path, knobs: Knobs, texts: list[str]) -> list[dict[str, Any]]:
    """One speculators sample per prompt: input_ids, aux hidden states, the last hidden
    state, loss mask (the answer only), lengths and position ids."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(target)
    model = LlamaForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    captured: dict[str, Any] = {}
    model.model.norm.register_forward_hook(
        lambda _m, args, _out: captured.__setitem__("last", args[0])
    )
    samples = []
    for text in texts:
        prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
        answer = _generate(model, torch, prompt, knobs.answer_tokens)
        ids = torch.tensor([prompt + answer])
        with torch.no_grad():
            out = model(ids, output_hidden_states=True)
        aux = torch.cat([out.hidden_states[i][0] for i in knobs.aux_layer_ids], dim=-1)
        samples.append(
            {
                "input_ids": ids[0],
                "hidden_states": aux,
                "verifier_last_hidden_states": captured["last"][0],
                "loss_mask": torch.tensor([0] * len(prompt) + [1] * len(answer)),
                "lengths": torch.tensor([ids.shape[1]]),
                "position_ids": torch.arange(ids.shape[1]),
            }
        )
    return samples


def pack(samples: list[dict[str, Any]], torch: Any) -> dict[str, Any]:
    """Shifted samples concatenated into one [1, n, ...] sequence with document ids
    (speculators/train/data.py's collate layout, without padding)."""
    keys = ("input_ids", "hidden_states", "verifier_last_hidden_states", "loss_mask")
    batch = {k: torch.cat([s[k] for s in samples]).unsqueeze(0) for k in keys}
    batch["position_ids"] = torch.cat([s["position_ids"] for s in samples]).unsqueeze(0)
    lengths = torch.cat([s["lengths"] for s in samples])
    ids = torch.repeat_interleave(torch.arange(lengths.shape[0]), lengths)
    batch["document_ids"] = ids.unsqueeze(0)
    batch["loss_mask"] = batch["loss_mask"].float()
    return batch


def build_head(target: Path, knobs: Knobs) -> Any:
    """speculators' P-EAGLE head for the target, as its trainer builds one."""
    import copy

    import torch
    from speculators.models.peagle import PEagleDraftModel
    from transformers import AutoConfig

    torch.manual_seed(knobs.seed)
    layer_config = copy.deepcopy(AutoConfig.from_pretrained(target))
    layer_config.num_hidden_layers = knobs.num_layers
    vocab = layer_config.vocab_size
    # The draft vocabulary: the first draft_vocab_size target ids (d2t holds offsets).
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[: knobs.draft_vocab_size] = True
    d2t = torch.zeros(knobs.draft_vocab_size, dtype=torch.long)
    return PEagleDraftModel.from_training_args(
        verifier_config=layer_config,
        t2d=t2d,
        d2t=d2t,
        verifier_name_or_path=str(target),
        target_layer_ids=list(knobs.aux_layer_ids),
        draft_vocab_size=knobs.draft_vocab_size,
        mask_token_id=knobs.mask_token_id,
        num_depths=knobs.num_depths,
        draft_attn_impl=knobs.attn_implementation,
    )


def train(
    model: Any, samples: list[dict[str, Any]], knobs: Knobs
) -> tuple[list[dict[str, float]], float]:
    """The minimal loop around speculators' forward + loss; per-step metrics and seconds."""
    import torch
    from speculators.models.eagle3.data import shift_batch

    train_kwargs, _ = type(model).get_trainer_kwargs(
        loss_fn=knobs.loss,
        loss_implementation=knobs.loss_implementation,
        num_depths=knobs.num_depths,
        down_sample_ratio=knobs.down_sample_ratio,
        down_sample_ratio_min=knobs.down_sample_ratio_min,
    )
    shifted = [shift_batch(s) for s in samples]
    rng = random.Random(knobs.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=knobs.learning_rate)
    history = []
    model.train()
    start = time.perf_counter()
    for _step in range(knobs.steps):
        chosen: list[dict[str, Any]] = []
        while sum(int(s["lengths"][0]) for s in chosen) < knobs.pack_tokens:
            chosen.append(shifted[rng.randrange(len(shifted))])
        _, loss, metrics = model(**pack(chosen, torch), **train_kwargs)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        history.append(_metrics(metrics, knobs.num_depths))
        if (_step + 1) % 25 == 0:
            _log(f"step {_step + 1}: {history[-1]} ({time.perf_counter() - start:.1f} s)")
    return history, time.perf_counter() - start


def _metrics(metrics: dict[str, Any], depths: int) -> dict[str, float]:
    out = {"loss": float(metrics["loss_sum"])}
    for d in range(depths):
        total = float(metrics.get(f"position_{d}_acc_total", 0))
        if total:
            out[f"acc_{d}"] = float(metrics[f"position_{d}_acc_sum"]) / total
    return out


def run(target: Path, out: Path, knobs: Knobs) -> dict[str, Any]:
    """Untrained head saved, data built, head trained, trained head saved; the summary."""
    from importlib.metadata import version

    import torch

    torch.manual_seed(knobs.seed)
    out.mkdir(parents=True, exist_ok=True)
    model = build_head(target, knobs)
    model.save_pretrained(out / UNTRAINED_SUBDIR)
    began = time.perf_counter()
    samples = build_samples(target, knobs, prompts(knobs.samples, knobs.seed, knobs.prompt_words))
    data_seconds = time.perf_counter() - began
    _log(f"{len(samples)} samples from the target in {data_seconds:.1f} s")
    history, seconds = train(model, samples, knobs)
    model.save_pretrained(out / CHECKPOINT_SUBDIR)
    tail = history[-20:]
    summary = {
        "knobs": asdict(knobs),
        "steps": len(history),
        "train_seconds": round(seconds, 2),
        "data_seconds": round(data_seconds, 2),
        "samples": len(samples),
        "first": history[0],
        "last20": {k: sum(h.get(k, 0.0) for h in tail) / len(tail) for k in tail[-1]},
        "versions": {
            "speculators": version("speculators"),
            "torch": torch.__version__,
            "transformers": version("transformers"),
        },
    }
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", type=Path, help="the rule target (tiny_models.write_rule_target)")
    parser.add_argument("out", type=Path, help="writes untrained/, checkpoint/, " + SUMMARY_FILE)
    parser.add_argument("--steps", type=int, default=Knobs.steps)
    ns = parser.parse_args(argv)
    summary = run(ns.target, ns.out, Knobs(steps=ns.steps))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
