"""The conversations: read, hashed, split into training and held-out prompts, checked.

The held-out prompts are split off before anything else sees the data (regeneration,
prepare-data, the trainer), so the acceptance the job records is measured on prompts the
drafter never trained on. Speculators' own train/validation split (train_data_ratio) is
taken later from the training part only.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from peagle_train.failures import DriverError

DATA_SUFFIXES: Final = (".jsonl", ".json")
ROLE_ALIASES: Final = {"human": "user", "gpt": "assistant"}
MIN_VOCAB_COVERAGE: Final = 0.95
"""Share of the trainable tokens the draft vocabulary must hold. A drafter can only
propose tokens in its vocabulary (d2t maps draft ids to target ids), so every token
outside it is a guaranteed rejection; below 95% the draft vocabulary is too small for
the data, which training would not report."""


@dataclass(frozen=True)
class Split:
    train: list[list[dict[str, str]]]
    held_out_prompts: list[str]
    sha256: str


def data_files(channel: Path) -> list[Path]:
    files = sorted(p for p in channel.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES)
    if not files:
        raise DriverError(f"data: no .jsonl/.json file in the data channel ({channel})")
    return files


def data_sha256(files: Sequence[Path], root: Path) -> str:
    """One hash over the channel: each file's relative name and bytes, in name order."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


# Per format (contract.DATA_FORMATS): the list key and each turn's role and text keys.
_CHAT_KEYS: Final = {
    "openai-chat": ("messages", "role", "content"),
    "sharegpt": ("conversations", "from", "value"),
}


def _turns(record: object, where: str, data_format: str) -> list[dict[str, str]]:
    """One conversation as role/content turns, read strictly in the declared format."""
    if not isinstance(record, dict):
        raise DriverError(f"data: {where} is not a JSON object")
    if data_format == "openai-completions":
        prompt, completion = record.get("prompt"), record.get("completion")
        if not isinstance(prompt, str) or not isinstance(completion, str):
            raise DriverError(f"data: {where} has no prompt and completion strings ({data_format})")
        return [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}]
    key, role_key, text_key = _CHAT_KEYS[data_format]
    raw = record.get(key)
    if not isinstance(raw, list) or not raw:
        raise DriverError(f"data: {where} has no {key} list ({data_format})")
    turns = []
    for turn in raw:
        role = turn.get(role_key) if isinstance(turn, dict) else None
        text = turn.get(text_key) if isinstance(turn, dict) else None
        if not isinstance(role, str) or not isinstance(text, str):
            raise DriverError(f"data: {where} has a turn without {role_key} and {text_key} strings")
        turns.append({"role": ROLE_ALIASES.get(role, role), "content": text})
    return turns


def read_conversations(
    files: Sequence[Path], root: Path, data_format: str
) -> list[list[dict[str, str]]]:
    conversations = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            where = f"{path.relative_to(root)}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DriverError(f"data: {where} is not JSON ({e.msg})") from None
            conversations.append(_turns(record, where, data_format))
    return conversations


def _first_user_prompt(conversation: list[dict[str, str]]) -> str | None:
    return next((t["content"] for t in conversation if t["role"] == "user"), None)


def split_held_out(channel: Path, held_out: int, seed: int, data_format: str) -> Split:
    files = data_files(channel)
    conversations = read_conversations(files, channel, data_format)
    order = list(range(len(conversations)))
    random.Random(seed).shuffle(order)
    held: list[str] = []
    held_idx: set[int] = set()
    for i in order:
        if len(held) == held_out:
            break
        prompt = _first_user_prompt(conversations[i])
        if prompt:
            held.append(prompt)
            held_idx.add(i)
    train = [c for i, c in enumerate(conversations) if i not in held_idx]
    if len(held) < held_out or not train:
        raise DriverError(
            f"data: {len(conversations)} conversations cannot give {held_out} held-out "
            "prompts and still leave some to train on; lower held_out_prompts or add data"
        )
    return Split(train=train, held_out_prompts=held, sha256=data_sha256(files, channel))


def write_conversations(path: Path, conversations: Iterable[list[dict[str, str]]]) -> None:
    """prepare-data reads the `conversations` column; regenerate-responses reads it too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for conversation in conversations:
            f.write(json.dumps({"conversations": conversation}, ensure_ascii=False) + "\n")


def trainable_tokens(rows: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(rows, tokens whose loss_mask is 1) over prepare-data's output rows."""
    count = tokens = 0
    for row in rows:
        count += 1
        tokens += sum(1 for m in row["loss_mask"] if m)
    return count, tokens


def require_trainable(rows: int, tokens: int) -> None:
    if tokens == 0:
        raise DriverError(
            f"chat template: prepare-data kept {rows} rows with zero trainable tokens; the "
            "loss mask covers no assistant token: the template renders no assistant turn "
            "boundary, every answer was cut by max_seq_len, or the render endpoint refused "
            "every conversation (prepare-data's log above names the cause)"
        )


def vocab_coverage(
    token_freq: Mapping[int, int], draft_vocab_size: int, target_vocab_size: int
) -> float:
    """Share of trainable tokens in the draft vocabulary speculators builds (the
    draft_vocab_size most frequent ids, train/vocab_mapping.py)."""
    outside = sorted(t for t in token_freq if not 0 <= t < target_vocab_size)
    if outside:
        raise DriverError(
            f"vocabulary: the data holds token id {outside[0]}, outside the target's "
            f"vocab_size {target_vocab_size}; the tokenizer does not belong to this target"
        )
    total = sum(token_freq.values())
    if total == 0:
        require_trainable(0, 0)
    ranked = sorted(token_freq.values(), reverse=True)
    return sum(ranked[:draft_vocab_size]) / total


def require_coverage(coverage: float, draft_vocab_size: int) -> None:
    if coverage < MIN_VOCAB_COVERAGE:
        raise DriverError(
            f"vocabulary: a draft vocabulary of {draft_vocab_size} tokens (d2t/t2d) covers "
            f"{coverage:.1%} of the trainable tokens, below {MIN_VOCAB_COVERAGE:.0%}; raise "
            "draft_vocab_size"
        )
