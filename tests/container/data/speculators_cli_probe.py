"""Parse the training driver's argv with speculators' and torch's OWN parsers.

Run by tests/container/test_train_commands.py in the training environment (speculators
0.9.0 with its CLI dependencies, torch). Reads {"name": argv, ...} on stdin and prints
{"name": parsed-or-error} as JSON. What each kind asks, with import paths read from the
installed wheels:
- `python -m speculators <command> ...`: speculators.cli.app (typer) turned into its click
  group (typer.main.get_command); the command's make_context parses the arguments and
  runs the option callbacks (e.g. regenerate-responses' --dataset file check) without
  invoking the command.
- `torchrun ... -m speculators.train ...`: torch.distributed.run.get_args_parser() parses
  torchrun's part; the rest goes through speculators.train.config.TrainConfig.resolve,
  the exact call `python -m speculators.train` makes (argparse from the schema, pydantic
  validation, the draft-init rules), and the resolved flat config plus each field's
  provenance come back.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


def parse_speculators(argv: list[str]) -> dict[str, Any]:
    import click
    import typer.main
    from speculators.cli import app

    assert argv[1:3] == ["-m", "speculators"], argv[:3]
    group = typer.main.get_command(app)
    name, rest = argv[3], argv[4:]
    with click.Context(group) as parent:
        command = group.get_command(parent, name)
        if command is None:
            return {"error": f"no command {name}"}
        try:
            ctx = command.make_context(name, list(rest), parent=parent)
        except click.ClickException as e:
            return {"error": e.format_message()}
    return {"params": _jsonable(ctx.params)}


def parse_train(argv: list[str]) -> dict[str, Any]:
    from speculators.train.config import TrainConfig
    from torch.distributed.run import get_args_parser

    assert argv[0] == "torchrun", argv[0]
    runner = get_args_parser().parse_args(argv[1:])
    out: dict[str, Any] = {
        "torchrun": {
            "standalone": runner.standalone,
            "nnodes": runner.nnodes,
            "nproc_per_node": runner.nproc_per_node,
            "module": runner.module,
            "training_script": runner.training_script,
        }
    }
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            cfg = TrainConfig.resolve(list(runner.training_script_args))
    except SystemExit as e:
        return {**out, "error": f"exit {e.code}: {err.getvalue().strip()}"}
    out["config"] = _jsonable(cfg.flatten())
    out["provenance"] = dict(cfg.provenance)
    return out


def main() -> int:
    # The libraries log to stdout (vLLM's logger); only the JSON answer goes there.
    answer, sys.stdout = sys.stdout, sys.stderr
    cases = json.load(sys.stdin)
    results = {}
    for name, argv in cases.items():
        try:
            results[name] = parse_train(argv) if argv[0] == "torchrun" else parse_speculators(argv)
        except Exception as e:  # reported per case; the test names it
            results[name] = {"error": f"{type(e).__name__}: {e}"}
    json.dump(results, answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
