"""A model reference that is not a catalog key: a near miss is answered offline with the
key meant, a JumpStart id without the `jumpstart` extra names the extra; never a
traceback, never a JumpStart or AWS read for a typo (issue 23, item 1)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from peagle_deploy.catalog import MODELS
from peagle_deploy.catalog import resolve as resolve_module
from peagle_deploy.catalog.near_miss import near_misses, recorded_jumpstart_ids
from peagle_deploy.cli.app import main

JUMPSTART_ID = "openai-reasoning-gpt-oss-20b"


@pytest.mark.parametrize(
    ("reference", "meant"),
    [
        ("qwen3-coder-30b", ["qwen3-coder-30b-a3b-instruct"]),  # truncated at a dash
        ("gemma-4", ["gemma-4-31b-it"]),
        ("gpt-oss", ["gpt-oss-120b", "gpt-oss-20b"]),
        ("GPT-OSS-20B", ["gpt-oss-20b"]),  # other case
        ("gpt-oss-20", ["gpt-oss-20b"]),  # a typo
        ("gemma-4-31b-itt", ["gemma-4-31b-it"]),
        ("gpt-oss-2b", ["gpt-oss-20b"]),  # the closest typo only, not also gpt-oss-120b
        ("openai-reasoning-gpt-oss", ["gpt-oss-120b", "gpt-oss-20b"]),  # a recorded id, cut
    ],
)
def test_near_misses_name_the_catalog_keys(reference: str, meant: list[str]) -> None:
    assert near_misses(reference) == meant
    assert all(key in [*MODELS, "custom"] for key in meant)


@pytest.mark.parametrize(
    "reference",
    [
        JUMPSTART_ID,  # a recorded JumpStart id goes to JumpStart
        "openai-reasoning-gpt-oss-safeguard-20b",  # close to a recorded id, but may be real
        "meta-textgeneration-llama-3-8b",
        "gpt-oss-20b",
        "custom",
        "",
    ],
)
def test_real_names_and_other_ids_are_no_near_miss(reference: str) -> None:
    assert near_misses(reference) == []


def test_recorded_ids_map_to_their_keys() -> None:
    assert recorded_jumpstart_ids()[JUMPSTART_ID] == "gpt-oss-20b"


def _no_jumpstart(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail the test if anything reaches JumpStart (the SDK, its bucket, credentials)."""
    reached: list[str] = []

    def refuse(model_id: str, *_: Any, **__: Any) -> Any:
        reached.append(model_id)
        raise AssertionError(f"JumpStart was read for {model_id}")

    monkeypatch.setattr(resolve_module, "resolve_jumpstart", refuse)
    return reached


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("qwen3-coder-30b", "qwen3-coder-30b-a3b-instruct"), ("gemma-4", "gemma-4-31b-it")],
)
def test_plan_of_a_near_miss_suggests_the_key_before_jumpstart(
    typo: str, meant: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the sagemaker SDK importable (the dev install): still no JumpStart read."""
    reached = _no_jumpstart(monkeypatch)
    assert main(["plan", typo]) == 2
    err = capsys.readouterr().err
    assert reached == []
    assert f"did you mean {meant}?" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _plan_without_sagemaker(*argv: str) -> subprocess.CompletedProcess[str]:
    """`peagle plan` in a process where `import sagemaker` fails, as in the environment
    `make demo` installs (`.[local,bench]`, no `jumpstart` extra)."""
    code = (
        "import sys; sys.modules['sagemaker'] = None\n"  # find_spec -> None, import fails
        "from peagle_deploy.cli.app import main\n"
        f"sys.exit(main({list(argv)!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_jumpstart_id_without_the_extra_names_it_in_one_line() -> None:
    done = _plan_without_sagemaker("plan", JUMPSTART_ID)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "install -e '.[jumpstart]'" in lines[0]  # a clone's form (issue 35)
    assert JUMPSTART_ID in lines[0] and "gpt-oss-20b" in lines[0]  # the catalog keys too


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("qwen3-coder-30b", "qwen3-coder-30b-a3b-instruct"), ("gemma-4", "gemma-4-31b-it")],
)
def test_near_miss_without_the_extra_suggests_the_key(typo: str, meant: str) -> None:
    done = _plan_without_sagemaker("plan", typo)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: model: unknown model {typo!r}; did you mean {meant}? (allowed: "
        + ", ".join([*MODELS, "custom"])
        + ")"
    ]
