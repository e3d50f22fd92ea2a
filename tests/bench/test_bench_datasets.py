"""Datasets: HumanEval from the installed package, JSONL chats, seeded sampling."""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

import pytest

from peagle_deploy.bench.datasets import HUMANEVAL_INSTRUCTION, load_dataset
from peagle_deploy.errors import InputError


def test_humaneval_has_the_164_problems() -> None:
    data = load_dataset("humaneval")
    assert len(data) == 164
    first = data.prompts[0][0]
    assert first["role"] == "user"
    assert first["content"].startswith(HUMANEVAL_INSTRUCTION)
    assert "def has_close_elements" in first["content"]


def test_sampler_is_seeded_and_uses_every_prompt_before_repeating() -> None:
    data = load_dataset("humaneval")
    a = [m[0]["content"] for m in itertools.islice(data.sampler(7), 164)]
    b = [m[0]["content"] for m in itertools.islice(data.sampler(7), 164)]
    c = [m[0]["content"] for m in itertools.islice(data.sampler(8), 164)]
    assert a == b
    assert a != c
    assert len(set(a)) == 164


def test_jsonl_dataset(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_text(
        '{"messages": [{"role": "user", "content": "hi"}]}\n\n'
        '{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]}\n'
    )
    data = load_dataset(str(path))
    assert len(data) == 2
    assert data.prompts[1][1]["content"] == "q"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"prompt": "x"}', "no 'messages'"),
        ('{"messages": []}', "non-empty list"),
        ('{"messages": [{"content": "x"}]}', "messages[0] needs a string 'role'"),
        ('{"messages": [{"role": "user"}]}', "has no 'content'"),
    ],
)
def test_bad_jsonl_names_the_line(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "ok"}]}\n' + line + "\n")
    with pytest.raises(InputError) as err:
        load_dataset(str(path))
    assert err.value.field == "--dataset"
    assert f"{path} line 2" in str(err.value)
    assert problem in str(err.value)


def test_unknown_dataset_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="neither 'humaneval' nor an existing file"):
        load_dataset(str(tmp_path / "missing.jsonl"))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(InputError, match="has no prompts"):
        load_dataset(str(empty))


def test_dataset_from_a_pipe_is_read(tmp_path: Path) -> None:
    """`--dataset <(zcat chats.jsonl.gz)`: a pipe is a dataset too, not "no such file"."""
    fifo = tmp_path / "chats.jsonl"
    os.mkfifo(fifo)
    line = '{"messages": [{"role": "user", "content": "from a pipe"}]}\n'

    def write() -> None:
        with fifo.open("w") as f:
            f.write(line * 3)

    writer = threading.Thread(target=write)
    writer.start()
    data = load_dataset(str(fifo))
    writer.join()
    assert len(data) == 3 and data.prompts[0][0]["content"] == "from a pipe"
    with pytest.raises(InputError, match="is a directory"):
        load_dataset(str(tmp_path))
