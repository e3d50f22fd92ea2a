"""The spec flags as typer options, for every command that takes a spec.

`@spec_options` adds one option per row of the spec's flag table
(`peagle_deploy.spec.flags`, read from its data form `flag_table.json`, which keeps
pydantic off the start-up path; made options by peagle_deploy.cli.flags) to a command,
grouped in help panels, and hands the command the given ones as `load_spec` overrides in
its `knobs` parameter. `peagle plan`, `deploy` and `doctor` use it; so can any later
command that reads a spec.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from peagle_deploy.cli.flags import option, take_given
from peagle_deploy.spec.flags import cli_table

MODEL_DOC, FLAGS = cli_table()
KNOBS = "knobs"
"""The parameter through which a decorated command receives the spec overrides."""

ModelArg = Annotated[
    str | None,
    typer.Argument(
        help=f"{MODEL_DOC} Optional when the spec file names the model.",
        show_default=False,
        metavar="MODEL",
    ),
]
FileOpt = Annotated[
    Path | None,
    typer.Option("--file", "-f", help="Spec file (YAML or JSON); flags override it."),
]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON only.")]
_DOC = {flag.keyword: flag.doc for flag in FLAGS}
RegionOpt = Annotated[str | None, typer.Option("--region", help=_DOC["region"], show_default=False)]
StageOpt = Annotated[str | None, typer.Option("--stage", help=_DOC["stage"], show_default=False)]

F = TypeVar("F", bound=Callable[..., Any])


def spec_options(command: F) -> F:
    """Give `command` every spec flag; it receives the given ones as `knobs`.

    `knobs` maps dotted spec paths to values (unset flags are left out), ready for
    `load_cli_spec(file, model, knobs)`.
    """
    signature = inspect.signature(command, eval_str=True)
    if KNOBS not in signature.parameters:
        raise TypeError(f"{command.__name__} needs a `{KNOBS}` parameter")
    flags = FLAGS
    # Keyword-only throughout: typer passes every value by name.
    own = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in signature.parameters.values()
        if p.name != KNOBS
    ]
    clash = {p.name for p in own} & {f.keyword for f in flags}
    if clash:
        raise TypeError(f"{command.__name__}: parameters {sorted(clash)} shadow spec flags")
    at = list(signature.parameters).index(KNOBS)
    params = [*own[:at], *(option(f) for f in flags), *own[at:]]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        knobs = {row.path: value for row, value in take_given(flags, kwargs)}
        return command(**kwargs, **{KNOBS: knobs})

    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper  # type: ignore[return-value]
