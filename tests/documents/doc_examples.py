"""The fenced examples of README.md, CONTRIBUTING.md and docs/*.md, and how each one runs.

A block is one of:
- run: ```bash (one `bash -e` script), ```console (`$ ` commands; the lines after a
  command are output the command must print, where `<name>` stands for one run of
  non-blank characters that differs on every run: a port, a key), ```python (a
  subprocess), a ```yaml /
  ```json deployment spec (a mapping with `model:`; planned with `peagle plan --file`);
- a file: `<!-- file: NAME -->` before a ```yaml / ```json block writes it to NAME in the
  document's working directory, for the blocks after it (a spec is planned too);
- run by another test: `<!-- run-by: tests/PATH.py -->`, a test that reads this document;
- illustrative: `<!-- illustrative: REASON -->`, for what cannot run on this machine
  (a GPU, a real AWS account, a registry push); the reason is required.
Blocks without a language (diagrams, log lines) are text.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = frozenset({"bash", "console", "python", "yaml", "json"})
MARKER = re.compile(r"^<!--\s*([a-z-]+):(.*?)-->$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
# Entries of the repository a document's commands may write into: copied, not linked.
COPIED = ("stages", "gates.example.yaml")
# Never handed to an example: the examples run against the emulator only.
AWS_IDENTITY = (
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "CDK_DEFAULT_ACCOUNT",
)
COMMAND_TIMEOUT_S = 300


def documents() -> list[Path]:
    """The documents whose examples must run, relative to the repository."""
    docs = sorted((ROOT / "docs").glob("*.md"))
    return [p for p in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *docs] if p.is_file()]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marker: str | None  # illustrative | file | run-by
    marker_value: str

    @property
    def where(self) -> str:
        shown = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{shown}:{self.line}"


def _marker_before(lines: list[str], index: int) -> tuple[str | None, str]:
    """The `<!-- kind: value -->` comment on the last non-blank line before a fence."""
    for line in reversed(lines[:index]):
        if line.strip():
            found = MARKER.match(line.strip())
            return (found.group(1), found.group(2).strip()) if found else (None, "")
    return None, ""


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with its marker."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, lang = opening.group(1), opening.group(2).lower()
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [line.removeprefix(indent) for line in lines[i + 1 : end]]
        marker, value = _marker_before(lines, i)
        found.append(Block(path, i + 1, lang, "\n".join(body) + "\n", marker, value))
        i = end + 1
    return found


def is_spec(block: Block) -> bool:
    """A YAML/JSON block that is a deployment spec (a mapping naming a model)."""
    if block.lang not in {"yaml", "json"}:
        return False
    try:
        doc = yaml.safe_load(block.text)
    except yaml.YAMLError:
        return False
    return isinstance(doc, dict) and "model" in doc


def sandbox(into: Path) -> Path:
    """A working directory that looks like the repository: links to its entries, copies
    of the ones a command may write to."""
    for entry in ROOT.iterdir():
        if entry.name in {".git", "cdk.out"}:
            continue
        target = into / entry.name
        if entry.name in COPIED:
            copy = shutil.copytree if entry.is_dir() else shutil.copy
            copy(entry, target)
        else:
            target.symlink_to(entry)
    return into


def example_env(emulator: dict[str, str]) -> dict[str, str]:
    """The environment of every example: the project's venv first on PATH, and AWS only
    through the emulator."""
    env = {k: v for k, v in os.environ.items() if k not in AWS_IDENTITY}
    env = {k: v for k, v in env.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env.update(emulator)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([venv_bin, env.get("PATH", "")])
    env["CDK_DISABLE_CLI_TELEMETRY"] = "true"
    env["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"
    return env


@dataclass(frozen=True)
class Command:
    line: str  # as written after `$ `, continuation lines joined
    expected: list[str]  # output lines shown under it


def console_commands(text: str) -> list[Command]:
    """`$ ` commands (with `\\` continuations) and the output lines shown after each."""
    commands: list[Command] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        command = lines[i][2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        i += 1
        expected: list[str] = []
        while i < len(lines) and not lines[i].startswith("$ "):
            if lines[i].strip():
                expected.append(lines[i].strip())
            i += 1
        commands.append(Command(command, expected))
    return commands


def _squash(text: str) -> str:
    return " ".join(text.split())


PLACEHOLDER = re.compile(r"<[a-z][a-z0-9-]*>")
"""`<port>`, `<access-key-id>`: in an output line, what differs on every run."""


def output_pattern(line: str) -> re.Pattern[str]:
    """An expected output line as a pattern over squashed output: its text as written,
    each placeholder one run of non-blank characters."""
    parts = PLACEHOLDER.split(_squash(line))
    return re.compile(r"\S+".join(re.escape(part) for part in parts))


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def run_console(block: Block, cwd: Path, env: dict[str, str]) -> None:
    """Run each command in one shell; check the output shown and that every command not
    followed by `echo $?` exits 0."""
    commands = console_commands(block.text)
    assert commands, f"{block.where}: a console block without a `$ ` command"
    script = ["exec 2>&1"]
    for n, command in enumerate(commands):
        # the marker line keeps the command's status for an `echo $?` that follows
        script += [command.line, f"rc=$?; printf '\\n@@example %d %d\\n' {n} $rc; (exit $rc)"]
    result = _run(["bash", "-c", "\n".join(script)], cwd, env)
    outputs: dict[int, tuple[int, str]] = {}
    chunk: list[str] = []
    for line in result.stdout.splitlines():
        mark = re.fullmatch(r"@@example (\d+) (\d+)", line)
        if mark:
            outputs[int(mark.group(1))] = (int(mark.group(2)), "\n".join(chunk))
            chunk = []
        else:
            chunk.append(line)
    for n, command in enumerate(commands):
        assert n in outputs, f"{block.where}: `{command.line}` never finished:\n{result.stdout}"
        code, out = outputs[n]
        checked_next = n + 1 < len(commands) and commands[n + 1].line.strip() == "echo $?"
        assert code == 0 or checked_next, f"{block.where}: `{command.line}` exit {code}:\n{out}"
        for line in command.expected:
            assert output_pattern(line).search(_squash(out)), (
                f"{block.where}: `{command.line}` did not print {line!r}; it printed:\n{out}"
            )


def run_script(argv: list[str], block: Block, cwd: Path, env: dict[str, str]) -> None:
    result = _run(argv, cwd, env)
    assert result.returncode == 0, (
        f"{block.where}: exit {result.returncode}\n{block.text}\n"
        f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
    )


def run_block(block: Block, cwd: Path, env: dict[str, str]) -> None:
    """Run one block that is neither illustrative nor run by another test."""
    if block.lang == "bash":
        run_script(["bash", "-e", "-o", "pipefail", "-c", block.text], block, cwd, env)
    elif block.lang == "console":
        run_console(block, cwd, env)
    elif block.lang == "python":
        script = cwd / f"example-{block.path.stem}-{block.line}.py"
        script.write_text(block.text, encoding="utf-8")
        run_script([sys.executable, str(script)], block, cwd, env)
    else:
        name = block.marker_value if block.marker == "file" else f"spec-{block.line}.{block.lang}"
        (cwd / name).write_text(block.text, encoding="utf-8")
        if is_spec(block):
            run_script(["peagle", "plan", "--file", name], block, cwd, env)
