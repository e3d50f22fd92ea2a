"""The `peagle` typer app: one root group whose commands are built when they are used.

Every command, the project's own and those of other installed packages alike, is added
by its module's `register(app)` function, found by name in peagle_deploy.cli.registry.
The root group follows click's documented contract for lazily loaded subcommands
(`list_commands` and `get_command`): `peagle plan ...` imports and builds the plan
command only, and `peagle --help` lists the built-in commands from the registry's
summaries without importing their modules. Modules import heavy dependencies
(sagemaker, aws_cdk, matplotlib, boto3 clients) inside the command functions. The entry
point (peagle_deploy.cli.app.main) imports this module only for what its fast path
(peagle_deploy.cli.fast_plan) does not take.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, MutableMapping
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from peagle_deploy import __version__
from peagle_deploy.cli import guards, output, registry
from peagle_deploy.cli.interrupts import interrupt_code, interrupted
from peagle_deploy.errors import PeagleError

_LISTING = "peagle.listing"
"""ctx.meta key set while the root's help lists the commands."""


def _build(name: str, found: registry.Source) -> Any:
    """The click command `name`, from a fresh typer app its register function fills."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    registry.register_function(found.target)(app)
    command = typer.main.get_group(app).commands.get(name)
    if command is None:
        raise PeagleError(f"the peagle command package {found.target} adds no command {name!r}")
    guards.apply_rules(command)
    _say_how_to_resume(command)
    return command


class _Commands(MutableMapping[str, Any]):
    """The root's commands by name (every registered one), each built on first use."""

    def __init__(self) -> None:
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            found = registry.source(name)
            if found is None:
                raise KeyError(name)
            self._built[name] = _build(name, found)
        return self._built[name]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._built or registry.source(name) is not None)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*registry.names(), *self._built]))

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def summary(self, name: str) -> str | None:
        """A command's one-line summary when it is known without building it."""
        found = None if name in self._built else registry.BUILT_IN.get(name)
        return None if found is None else found.summary


class LazyGroup(TyperGroup):
    """The root group: `commands` is a `_Commands`; help lists summaries unbuilt."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands()
        guards.apply_rules(self, nested=False)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        commands = self.commands
        summary = commands.summary(cmd_name) if isinstance(commands, _Commands) else None
        if summary is not None and ctx.meta.get(_LISTING):
            return TyperCommand(name=cmd_name, help=summary)
        return commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        ctx.meta[_LISTING] = True
        try:
            super().format_help(ctx, formatter)
        finally:
            ctx.meta.pop(_LISTING, None)


app = typer.Typer(
    cls=LazyGroup,
    name="peagle",
    help=(
        "Deploy and operate P-EAGLE (parallel speculative decoding) vLLM endpoints on "
        "Amazon SageMaker.\n\nStart with `peagle models`, then `peagle plan MODEL` to see "
        "exactly what would be sent to SageMaker."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _show_version(value: bool) -> None:
    if value:
        output.console.print(f"peagle-deploy {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    # Root options only; the help text is the app's.
    return None


def _say_how_to_resume(command: Any) -> None:
    """typer turns a Ctrl-C inside a command into a silent exit 130; every command's
    callback says first what was interrupted and how to resume."""
    callback: Callable[..., Any] | None = getattr(command, "callback", None)
    if callback is not None and not getattr(callback, "_peagle_resumable", False):

        @functools.wraps(callback)
        def resumable(*args: Any, **kwargs: Any) -> Any:
            try:
                return callback(*args, **kwargs)
            except KeyboardInterrupt as exc:
                interrupted(exc)
                raise typer.Exit(interrupt_code()) from None

        resumable._peagle_resumable = True  # type: ignore[attr-defined]
        command.callback = resumable
    for sub in getattr(command, "commands", {}).values():
        _say_how_to_resume(sub)


def run(argv: list[str] | None) -> int:
    """Run the typer app non-standalone: the exit code of a `typer.Exit`, and one line
    for typer's (vendored) click usage errors, which derive from `typer.TyperException`.
    Every parameter refuses an empty value (cli.guards). Other errors propagate to the
    entry point."""
    try:
        command = typer.main.get_command(app)
        result = command.main(args=argv, prog_name="peagle", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        output.error("aborted")
        return 1
    except typer.TyperException as exc:  # usage errors: bad option, missing argument, ...
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()  # type: ignore[attr-defined]  # `peagle` alone: the help
        else:
            output.error(guards.usage_error_line(exc))
        return int(getattr(exc, "exit_code", 2))
    return result if isinstance(result, int) and not isinstance(result, bool) else 0
