"""What stopped a newcomer (issue 31, item 7): `None` in output, an unknown field without
a did-you-mean and its allowed list cut mid-word, a too-short bucket called no S3
prefix, a positional model silently replacing the spec file's, `{NAME}` usage lines."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from peagle_deploy.cli.app import app, main

IMAGE = (
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker"
)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _custom_spec(tmp_path: Path, weights_gb: int) -> Path:
    """A custom model without max_model_len: vLLM takes the model's own."""
    spec = tmp_path / "custom.yaml"
    spec.write_text(
        "model: custom\ninstance_type: ml.g6e.xlarge\nspeculative: {mode: none}\n"
        f"custom:\n  image_uri: {IMAGE}\n  model_data_uri: s3://my-bucket/models/target/\n"
        f"  weights_gb: {weights_gb}\n  kv_cache_gb_per_1k_tokens: 0.5\n",
        encoding="utf-8",
    )
    return spec


def test_the_plan_says_what_an_unset_max_model_len_means(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = _run(capsys, "plan", "-f", str(_custom_spec(tmp_path, 16)))
    assert code == 0
    row = next(line for line in out.splitlines() if "max model len" in line)
    assert "None" not in row and "the model's own" in row


def test_a_refused_fit_names_only_the_parts_that_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "plan", "-f", str(_custom_spec(tmp_path, 60)), "--json")
    assert code == 2
    assert "None" not in err
    assert "model needs about 62 GB (weights 60 GB + overhead 1.5 GB)" in err


def test_an_unknown_field_offers_the_nearest_and_is_not_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "typo.yaml"
    spec.write_text("model: gpt-oss-20b\ninstance_typ: ml.g7e.2xlarge\n", encoding="utf-8")
    code, _, err = _run(capsys, "plan", "-f", str(spec), "--json")
    assert code == 2 and err.count("\n") == 1
    assert "instance_typ: unknown field; did you mean instance_type?" in err
    assert "…" not in err and err.rstrip().endswith("more (docs/specs.md))")
    nested = tmp_path / "nested.yaml"
    nested.write_text(
        "model: gpt-oss-20b\nspeculative: {num_speculative_token: 3}\n", encoding="utf-8"
    )
    code, _, err = _run(capsys, "plan", "-f", str(nested), "--json")
    assert code == 2
    assert "did you mean num_speculative_tokens?" in err
    assert err.rstrip().endswith("num_speculative_tokens_per_batch_size)")  # all of them


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("s3://d/p/", "bucket name 'd' is too short"),
        ("s3://My_Bucket/p/", "'My_Bucket' is not a valid S3 bucket name"),
        ("s3:///p/", "names no bucket"),
    ],
)
def test_a_bad_bucket_name_is_named_as_such(
    uri: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"model: gpt-oss-20b\ncustom: {{drafter_uri: '{uri}'}}\n", encoding="utf-8")
    code, _, err = _run(capsys, "plan", "-f", str(spec), "--json")
    assert code == 2
    assert problem in err and "is not an S3 prefix" not in err
    assert "3-63 characters" in err


def test_a_model_given_with_a_spec_file_says_which_it_replaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: gpt-oss-20b\nstage: staging\n", encoding="utf-8")
    code, out, err = _run(capsys, "plan", "-f", str(spec), "qwen3-coder-30b-a3b-instruct", "--json")
    assert code == 0 and '"ModelName": "peagle-qwen3-coder' in out
    assert "MODEL 'qwen3-coder-30b-a3b-instruct' replaces the spec file's model: " in err
    assert "'gpt-oss-20b'" in err
    code, _, err = _run(capsys, "plan", "-f", str(spec), "gpt-oss-20b", "--json")
    assert code == 0 and err == ""  # the same model: nothing replaced


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "peagle" for p in COMMANDS])
def test_usage_lines_name_arguments_plainly(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = _run(capsys, *path, "--help")
    assert code == 0
    usage = next(line for line in out.splitlines() if "Usage:" in line)
    assert "{" not in usage, usage
    assert not re.search(r" \[?[a-z_]+\]?(\.\.\.)?\s*$", usage.rstrip()), usage
