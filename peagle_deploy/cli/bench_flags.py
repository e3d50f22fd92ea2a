"""The flags of `peagle bench` and `peagle bench compare`.

The sweep knobs are declared once, on the models in `peagle_deploy.bench.settings`
(type, limits, default, docstring, `Flag` option names); their options come from that
table, as written to `bench/flag_table.json` (so that start-up builds no pydantic model),
made options by peagle_deploy.cli.flags like the spec's. Their values reach
`BenchSettings` as typed, and a refused one is one line naming the flag. The other flags
belong to the command line (which target, where the results go) and are declared here,
in RunFlags.
"""

from __future__ import annotations

import functools
import inspect
import math
import typing
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from peagle_deploy.cli import output
from peagle_deploy.cli.flags import given, number, option, take_given
from peagle_deploy.spec.flag_table import read_table

if TYPE_CHECKING:
    from peagle_deploy.bench.progress import RichProgress
    from peagle_deploy.bench.settings import SweepConfig
    from peagle_deploy.bench.targets import OpenAITarget, SageMakerTarget

FLAG_TABLE = Path(__file__).resolve().parents[1] / "bench" / "flag_table.json"
SWEEP_FLAGS = read_table(FLAG_TABLE)[1]
FLAG_OF = {row.keyword: row.flag for row in SWEEP_FLAGS}
"""Sweep knob -> its long flag (`duration_s` -> `--duration`)."""


JSON_FLAG = ("--json",)
JSON_HELP = "Write the results JSON to this file ('-': to stdout, instead of the table)."
JsonOpt = Annotated[
    str | None,
    typer.Option(*JSON_FLAG, help=JSON_HELP, parser=given("--json", "a file path, or -")),
]


def _meta(*decls: str, text: str, **option: Any) -> dict[str, Any]:
    return {"decls": decls, "help": text, "option": option}


def _flag(default: Any, *decls: str, text: str, **option: Any) -> Any:
    """A RunFlags field: its default, option names, help and typer extras."""
    return field(default=default, metadata=_meta(*decls, text=text, **option))


@dataclass(frozen=True)
class RunFlags:
    """The flags of `peagle bench` and `peagle bench compare` that are not sweep knobs,
    and (`sweep`) the sweep knobs given, as typed: `config()` validates them.

    The target defaults (request timeout, logs delay) are `bench.stream`'s constants,
    repeated here as literals so that `--help` imports no bench code; a test ties them.
    """

    model: str | None = _flag(
        None, "--model", text="Model name sent in requests (URL default: first /v1/models).",
        parser=given("--model", "a model name"),
    )  # fmt: skip
    region: str | None = _flag(
        None, "--region", text="AWS region (SageMaker).", parser=given("--region", "us-east-1")
    )
    ignore_eos: bool = _flag(
        False,
        "--ignore-eos",
        text="Send vLLM's ignore_eos so every response has max_tokens tokens.",
    )
    request_timeout: float = _flag(
        600.0, "--request-timeout", text="Seconds before one request counts as failed.",
        parser=number("--request-timeout", float, "> 0 seconds", minimum=math.ulp(0.0)),  # > 0
    )  # fmt: skip
    logs_delay: float = _flag(
        20.0,
        "--logs-delay",
        text="SageMaker: seconds to wait for the container's metric lines in CloudWatch Logs "
        "(a countdown on a terminal; skipped when no request completed).",
        parser=number("--logs-delay", float, ">= 0 seconds", minimum=0),
    )
    json_path: str | None = _flag(
        None, *JSON_FLAG, text=JSON_HELP, parser=given("--json", "a file path, or -")
    )
    report: str | None = _flag(
        None, "--report", text="Directory for results.json/.csv, report.md, throughput.png.",
        parser=given("--report", "a directory"),
    )  # fmt: skip
    progress: bool = _flag(
        True, "--progress/--no-progress",
        text="Progress bar per level on a terminal (not with --json), and the --logs-delay "
        "countdown.",
    )  # fmt: skip
    sweep: dict[str, str] = field(default_factory=dict)
    """The sweep-knob flags given (field name -> the value as typed)."""

    def config(self) -> SweepConfig:
        """The SweepConfig these flags describe (a refused value names its flag)."""
        from peagle_deploy.bench.settings import sweep_config

        return sweep_config(
            self.sweep, name_of=FLAG_OF, progress=self.progress and self.json_path is None
        )

    def listener(self) -> RichProgress:
        """Bars only without --json (stdout stays one JSON document); the --logs-delay
        countdown whenever progress is on: it is on stderr."""
        from peagle_deploy.bench.progress import RichProgress

        bars = self.progress and self.json_path is None
        return RichProgress(output.err_console, bars=bars, waits=self.progress)

    def target(
        self, address: str, *, label: str | None, model: str | None, region: str | None
    ) -> OpenAITarget | SageMakerTarget:
        from peagle_deploy.bench.targets import target_from_string

        return target_from_string(
            address,
            label=label,
            model=model,
            region=region,
            request_timeout_s=self.request_timeout,
            logs_delay_s=self.logs_delay,
            extra_body={"ignore_eos": True} if self.ignore_eos else None,
        )


_RUN_FIELDS = [f for f in fields(RunFlags) if "decls" in f.metadata]


def _option(name: str, default: Any, annotation: Any, meta: dict[str, Any]) -> inspect.Parameter:
    option = typer.Option(*meta["decls"], help=meta["help"], **meta["option"])
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[annotation, option],
    )


def sweep_flags(command: Callable[..., None]) -> Callable[..., None]:
    """Give `command` the sweep-knob and RunFlags options: typer sees them in the
    signature, the command receives their values as `flags: RunFlags`."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values()]
    own = [p for p in own if p.name != "flags"]
    hints = typing.get_type_hints(RunFlags)
    run = [_option(f.name, f.default, hints[f.name], dict(f.metadata)) for f in _RUN_FIELDS]
    first = [p for p in run if p.name in ("model", "region")]
    rest = [p for p in run if p.name not in ("model", "region")]

    @functools.wraps(command)
    def with_flags(*args: Any, **kwargs: Any) -> None:
        sweep = {row.keyword: value for row, value in take_given(SWEEP_FLAGS, kwargs)}
        values = {f.name: kwargs.pop(f.name) for f in _RUN_FIELDS}
        command(*args, flags=RunFlags(**values, sweep=sweep), **kwargs)

    sweep_options = [option(row, as_text=True) for row in SWEEP_FLAGS]
    signature = inspect.Signature([*own, *first, *sweep_options, *rest])
    with_flags.__signature__ = signature  # type: ignore[attr-defined]
    return with_flags
