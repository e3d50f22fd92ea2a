"""Hostile payloads and the checks every refusal must pass.

A refusal of bad input is: exit code 2 (or an InputError from the SDK), exactly one line
on stderr naming the field, no traceback, no AWS call, under 2 s (a hang guard,
generous on purpose: real refusals take milliseconds) and under 2 KB of output, and no
credential from the input in that output.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HF_TOKEN = "hf_" + "Zq8Lw2Nx4Vb6Mc1Kd3Jf5Hg7Tr9Ys0Pa2Ue"
"""Shaped like a Hugging Face token (hf_ + 34 letters and digits); made up."""
SECRETS = (HF_TOKEN,)
MODEL = "gpt-oss-20b"
ROLE = "arn:aws:iam::123456789012:role/peagle-hostile"
HANG_GUARD_S = 30.0
"""Hang guard, not a speed bound: a refusal that takes this long is stuck (a read that
waits, a loop that does not end). Speed is measured by benchmarks/hostile_refusals.py."""
MAX_OUTPUT_BYTES = 2048


# --- payloads ----------------------------------------------------------------------------


def billion_laughs(target: str) -> str:
    """YAML whose `target` (a dotted path) expands to 10**9 strings through aliases."""
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(8):
        prev, name = chr(97 + i), chr(98 + i)
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]")
    *parents, leaf = target.split(".")
    doc = [f"model: {MODEL}"] if target != "model" else []
    indent = ""
    for parent in parents:
        doc.append(f"{indent}{parent}:")
        indent += "  "
    doc.append(f"{indent}{leaf}: *i")
    return "\n".join(lines + doc) + "\n"


def deep_json(depth: int = 5000, key: str = "model") -> str:
    return '{"' + key + '": ' + "[" * depth + "]" * depth + "}"


def deep_yaml_flow(depth: int = 5000, key: str = "model") -> str:
    return f"{key}: " + "[" * depth + "]" * depth + "\n"


def deep_yaml_block(depth: int = 3000) -> str:
    return "".join(f"{'  ' * i}k{i}:\n" for i in range(depth)) + "  " * depth + "v: 1\n"


def random_bytes(n: int = 4096, seed: int = 13) -> bytes:
    return random.Random(seed).randbytes(n)


def tokenizer_json(target_bytes: int) -> bytes:
    """A tokenizer.json look-alike of about `target_bytes` (a file passed as a spec by
    mistake): its top-level `model` is a mapping holding a large vocabulary."""
    vocab: dict[str, int] = {}
    size = 0
    i = 0
    while size < target_bytes:
        token = f"tok{i:07d}Ġ"
        vocab[token] = i
        size += len(token) + 12
        i += 1
    doc = {
        "version": "1.0",
        "added_tokens": [{"id": 0, "content": "<|endoftext|>"}],
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    }
    return json.dumps(doc).encode()


# --- what a case is ----------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One hostile input to the CLI: argv (with `{tmp}` for the case's directory), files
    to write there first, environment variables, and the field the one line must name."""

    id: str
    argv: tuple[str, ...]
    field: str
    files: dict[str, bytes | str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    also: tuple[str, ...] = ()
    """More text the line must contain (the bound, the allowed values...)."""
    absent: tuple[str, ...] = ()
    """Text the output must not contain (an emoji, a token...)."""


def write_files(tmp: Path, files: dict[str, bytes | str]) -> None:
    for name, data in files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)


# --- AWS calls ---------------------------------------------------------------------------


class AwsCalls:
    """Every botocore API call attempted in this process (each one is refused)."""

    def __init__(self) -> None:
        self.names: list[str] = []


@contextmanager
def recording_aws_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsCalls]:
    """Record (and fail) any AWS API call: a refusal must come before the first one."""
    from botocore.client import BaseClient

    calls = AwsCalls()

    def refuse(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        calls.names.append(operation_name)
        raise AssertionError(f"AWS call {operation_name} made before the refusal")

    monkeypatch.setattr(BaseClient, "_make_api_call", refuse)
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    yield calls


# --- the checks --------------------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    seconds: float
    aws_calls: list[str]


def run_cli(capsys: pytest.CaptureFixture[str], calls: AwsCalls, argv: list[str]) -> Outcome:
    """`peagle ARGV` in this process, with its output captured."""
    from peagle_deploy.cli.app import main

    capsys.readouterr()
    before = len(calls.names)
    start = time.perf_counter()
    code = main(argv)
    seconds = time.perf_counter() - start
    out, err = capsys.readouterr()
    return Outcome(code, out, err, seconds, calls.names[before:])


def assert_refused(result: Outcome, fld: str, also: tuple[str, ...] = (), absent=()) -> str:  # type: ignore[no-untyped-def]
    """The promise for bad input; returns the one line."""
    text = result.out + result.err
    assert "Traceback" not in text, text[:2000]
    assert result.code == 2, text[:2000]
    lines = result.err.splitlines()
    assert len(lines) == 1, text[:2000]
    line = lines[0]
    assert line.startswith("error: "), line
    assert fld in line, line
    for part in also:
        assert part in line, (part, line)
    for part in (*SECRETS, *absent):
        assert part not in text, (part, line)
    assert result.aws_calls == [], result.aws_calls
    assert result.seconds < HANG_GUARD_S, (result.seconds, line)
    assert len(text.encode()) < MAX_OUTPUT_BYTES, len(text.encode())
    return line


def assert_input_error(call: Callable[[], Any], calls: AwsCalls, fld: str) -> str:
    """The SDK form of the promise: one InputError naming the field, short and safe."""
    from peagle_deploy.errors import InputError

    before = len(calls.names)
    start = time.perf_counter()
    with pytest.raises(InputError) as info:
        call()
    seconds = time.perf_counter() - start
    text = str(info.value)
    assert info.value.field == fld, text
    assert "\n" not in text and len(text.encode()) < MAX_OUTPUT_BYTES, text[:300]
    for secret in SECRETS:
        assert secret not in text
    assert calls.names[before:] == []
    assert seconds < HANG_GUARD_S
    return text
