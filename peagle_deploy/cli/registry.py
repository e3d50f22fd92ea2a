"""Where each `peagle` command comes from: one pattern for every command.

A command is added by a `register(app)` function of the module that defines it (it calls
`app.command(NAME)` or `app.add_typer(..., name=NAME)` on the typer app it is given),
found by the command's name as `"module:function"`:
- the project's own commands: `BUILT_IN` below, with the one-line summary `peagle
  --help` lists (tests/cli/test_cli_registry.py keeps it equal to the command's own
  help), so the list is printed without importing a command module;
- the commands of other installed packages (`peagle emulator`, `peagle demo` come from
  peagle_local): an entry point of the `peagle.commands` group named after the command,
  whose value is the same `"module:function"` (pyproject.toml). Their summary is read
  from the command itself. A built-in name cannot be taken over by a package.

The root group (peagle_deploy.cli.root) imports a command's module only when that
command runs, or when `peagle --help` lists a command of another package.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING, NamedTuple

from peagle_deploy.errors import PeagleError

if TYPE_CHECKING:
    import typer

GROUP = "peagle.commands"
"""The entry-point group of commands from other installed packages."""


class Source(NamedTuple):
    """Where one command is registered."""

    target: str
    """`"module:function"`: the `register(app)` function that adds the command."""
    summary: str | None = None
    """The first paragraph of the command's help on one line; None: read it from the
    command (another package's)."""


_PLAN = "peagle_deploy.cli.plan:register"
_LIFECYCLE = "peagle_deploy.cli.deploy:register"

BUILT_IN: dict[str, Source] = {
    "models": Source(
        _PLAN, "List the P-EAGLE launch models (or, with --instances, the GPU instance types)."
    ),
    "plan": Source(
        _PLAN, "Show the exact SageMaker requests a deployment would send (no AWS call)."
    ),
    "deploy": Source(
        _LIFECYCLE,
        "Create the endpoint, update it blue/green, or confirm it already serves the spec.",
    ),
    "status": Source(
        _LIFECYCLE,
        "Show an endpoint's status (exit 1 if it settled Failed when --wait is given).",
    ),
    "invoke": Source(
        _LIFECYCLE,
        "Send one chat message (OpenAI chat-completions payload) and print the answer.",
    ),
    "list": Source(
        _LIFECYCLE, "The project's endpoints (tag peagle:managed=true), optionally of one stage."
    ),
    "delete": Source(
        _LIFECYCLE,
        "Delete an endpoint with its endpoint configs, models and manifest (gone is fine).",
    ),
    "promote": Source(
        "peagle_deploy.cli.promote:register",
        "Promote what one stage runs to the next, only if the next stage's gates pass.",
    ),
    "doctor": Source(
        "peagle_deploy.cli.doctor:register",
        "Check read-only, in seconds, what SageMaker would refuse after CreateEndpoint.",
    ),
    "bench": Source(
        "peagle_deploy.cli.bench:register",
        "Measure tokens/s and latency over concurrency levels, as `vllm bench serve` does.",
    ),
    "experiment": Source(
        "peagle_deploy.cli.experiment:register",
        "Try other speculative settings on an endpoint's own traffic; promote the winner.",
    ),
    "train": Source(
        "peagle_deploy.cli.train:register",
        "Train a P-EAGLE drafter for your own model on SageMaker, then deploy it.",
    ),
    "image": Source(
        "peagle_deploy.cli.image:register",
        "The project's vLLM serving image (Dockerfile): what to build it FROM, per region.",
    ),
}
"""The project's commands, in the order `peagle --help` lists them."""


@cache
def installed() -> dict[str, Source]:
    """The commands of other installed packages (entry points of GROUP), by name.

    Read only when a name is not built in or when help lists every command: scanning the
    installed distributions costs more than the rest of `peagle plan`'s parsing.
    """
    from importlib.metadata import entry_points

    found: dict[str, Source] = {}
    for entry in entry_points(group=GROUP):
        if entry.name not in BUILT_IN:
            found.setdefault(entry.name, Source(entry.value))
    return found


def source(name: str) -> Source | None:
    """Where the command `name` comes from; None when no command has that name."""
    return BUILT_IN.get(name) or installed().get(name)


def names() -> list[str]:
    """Every command's name: the built-ins, then those of installed packages."""
    return [*BUILT_IN, *installed()]


def register_function(target: str) -> Callable[[typer.Typer], None]:
    """The `register(app)` function `"module:function"` names; a package that does not
    import (or lacks the function) is named in one line."""
    module_name, _, attr = target.partition(":")
    try:
        function: Callable[[typer.Typer], None] = getattr(import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise PeagleError(f"the peagle command package {target} does not import: {exc}") from None
    return function
