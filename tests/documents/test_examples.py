"""Every example in README.md, CONTRIBUTING.md and docs/*.md runs as written.

Each document's blocks run in order in one working directory (a copy of the repository's
layout), as subprocesses with the project's venv first on PATH and AWS replaced by one
emulator shared by all documents (`peagle emulator start`). What cannot run here is
marked `<!-- illustrative: REASON -->` just before the block; see doc_examples.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_examples import (
    ROOT,
    RUNNABLE,
    Block,
    blocks,
    documents,
    example_env,
    is_spec,
    output_pattern,
    run_block,
    sandbox,
)
from doc_links import broken_links

MARKERS = frozenset({"illustrative", "file", "run-by"})
EMULATOR_START_S = 60.0


def _all_blocks() -> list[Block]:
    return [b for path in documents() for b in blocks(path) if b.lang in RUNNABLE]


def _problem(block: Block) -> str | None:
    """Why a block's marking is wrong, or None."""
    if block.marker is not None and block.marker not in MARKERS:
        return f"unknown marker {block.marker!r} (known: {sorted(MARKERS)})"
    if block.marker == "illustrative" and not block.marker_value:
        return "`<!-- illustrative: REASON -->` needs a reason"
    if block.marker == "file" and (block.lang not in {"yaml", "json"} or "/" in block.marker_value):
        return "`<!-- file: NAME -->` marks a yaml or json block and names a plain file"
    if block.marker == "run-by":
        test = ROOT / block.marker_value
        if not test.is_file() or block.path.name not in test.read_text(encoding="utf-8"):
            return f"{block.marker_value} is not a test that reads {block.path.name}"
    if block.lang in {"yaml", "json"} and block.marker is None and not is_spec(block):
        return "a yaml/json block that is not a spec needs `file:` or `illustrative:`"
    return None


def test_every_block_runs_or_says_why() -> None:
    found = _all_blocks()
    assert len(found) > 20  # the parser sees the documents' blocks
    problems = [f"{b.where}: {why}" for b in found if (why := _problem(b))]
    assert problems == []


def test_every_relative_link_resolves() -> None:
    broken = [line for path in documents() for line in broken_links(path, ROOT)]
    assert broken == []


def _readme_exports() -> list[str]:
    """The `export NAME=value` lines the README shows `peagle emulator start` printing."""
    (block,) = [b for b in blocks(ROOT / "README.md") if "$ peagle emulator start" in b.text]
    assert block.marker == "run-by" and block.marker_value.endswith(Path(__file__).name)
    return [line for line in block.text.splitlines() if line.startswith("export ")]


@pytest.fixture(scope="module")
def emulator() -> Iterator[dict[str, str]]:
    """One emulator for every document, started as the README starts it; it prints the
    export lines the README shows (a port and a key of its own where the README has
    placeholders)."""
    command = [str(Path(sys.executable).with_name("peagle")), "emulator", "start"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    printed: list[str] = []
    guard = threading.Timer(EMULATOR_START_S, server.kill)  # a hang guard, not a timing check
    guard.start()
    try:
        while not printed or not printed[-1].startswith("export AWS_DEFAULT_REGION="):
            line = server.stdout.readline()
            assert line, "the emulator exited before printing its export lines"
            if line.startswith("export "):
                printed.append(line.strip())
        guard.cancel()
        shown = _readme_exports()
        assert len(printed) == len(shown), printed
        for expected, actual in zip(shown, printed, strict=True):
            assert output_pattern(expected).fullmatch(actual), (expected, actual)
        # keep reading what it prints, so that a full pipe never blocks it
        threading.Thread(target=server.stdout.read, daemon=True).start()
        exports = [line.removeprefix("export ").partition("=") for line in printed]
        yield {key: value for key, _, value in exports}
    finally:
        guard.cancel()
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.parametrize(
    "document",
    [p for p in documents() if any(b.lang in RUNNABLE for b in blocks(p))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_examples_run(document: Path, emulator: dict[str, str], tmp_path: Path) -> None:
    cwd = sandbox(tmp_path)
    env = example_env(emulator)
    for block in blocks(document):
        if block.lang in RUNNABLE and block.marker not in {"illustrative", "run-by"}:
            if "npx " in block.text:
                _need_the_cdk_cli()
            run_block(block, cwd, env)


def _need_the_cdk_cli() -> None:
    """Skip where Node.js or the pinned CDK CLI is missing on a developer machine (as
    tests/infra does); in CI (CI=true) that is a failure."""
    if shutil.which("npx") and (ROOT / "node_modules" / "aws-cdk").is_dir():
        return
    if os.environ.get("CI") == "true":
        pytest.fail("npx or node_modules/aws-cdk missing in CI: run `make setup`")
    pytest.skip("Node.js/npx or the pinned CDK CLI is not installed here (`make setup`)")


# --- the runner itself: each check can fail -------------------------------------------


def _block(tmp_path: Path, text: str, lang: str = "console") -> Block:
    return Block(tmp_path / "doc.md", 1, lang, text, None, "")


def test_console_checks_output_and_exit_codes(tmp_path: Path) -> None:
    env = dict(os.environ)
    run_block(
        _block(tmp_path, "$ echo hello  world\nhello world\n$ false\n$ echo $?\n1\n"), tmp_path, env
    )
    with pytest.raises(AssertionError, match="did not print 'bye'"):
        run_block(_block(tmp_path, "$ echo hi\nbye\n"), tmp_path, env)
    run_block(_block(tmp_path, "$ echo port 5599 up\nport <port> up\n"), tmp_path, env)
    with pytest.raises(AssertionError, match="did not print 'port <port> up'"):
        run_block(_block(tmp_path, "$ echo port  up\nport <port> up\n"), tmp_path, env)
    with pytest.raises(AssertionError, match="exit 1"):
        run_block(_block(tmp_path, "$ false\n$ echo next\n"), tmp_path, env)
    with pytest.raises(AssertionError, match="exit 3"):
        run_block(_block(tmp_path, "true\nexit 3\n", lang="bash"), tmp_path, env)


def test_markers_are_read_and_judged(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- illustrative: -->\n```bash\nx\n```\n\n"
        "<!-- illustrative: needs a GPU -->\n```bash\nx\n```\n\n"
        "```yaml\na: 1\n```\n\n"
        "<!-- file: gates.yaml -->\n```yaml\na: 1\n```\n\n"
        "<!-- ilustrative: typo -->\n```bash\nx\n```\n",
        encoding="utf-8",
    )
    found = blocks(doc)
    assert [(b.marker, b.marker_value) for b in found] == [
        ("illustrative", ""),
        ("illustrative", "needs a GPU"),
        (None, ""),
        ("file", "gates.yaml"),
        ("ilustrative", "typo"),
    ]
    assert [_problem(b) is None for b in found] == [False, True, False, True, False]


def test_anchors_are_githubs(tmp_path: Path) -> None:
    from doc_links import anchors, slug

    assert slug("Models, specs and plans (`peagle models`, `peagle plan`)") == (
        "models-specs-and-plans-peagle-models-peagle-plan"
    )
    doc = tmp_path / "a.md"
    doc.write_text("# A\n## Set up\n## Set up\n[x](#set-up-1) [y](b.md) [z](#nope)\n")
    assert anchors(doc) == {"a", "set-up", "set-up-1"}
    assert broken_links(doc, tmp_path) == [
        "a.md:4: b.md (no such file)",
        "a.md:4: #nope (no such heading in a.md)",
    ]
