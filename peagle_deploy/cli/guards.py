"""Rules every option and argument of every `peagle` command obeys, applied in one place.

- An empty value (`--region ''`, `peagle status ''`: an unset shell variable) is an
  error naming the flag, checked before the value is converted (`--file ''` would
  otherwise become the current directory) and before the command runs. The rule itself
  is the one of the flag table and the spec (`peagle_deploy.spec.empty`).
- A usage error (unknown option, a value of the wrong type) is one line that names the
  option and where help is, with any echoed value cut and masked like every error.
- A boolean flag shows in help without a type; an argument is NAME in capitals, in the
  usage line, in help and in errors (typer writes a required one `{name}`).
"""

from __future__ import annotations

from typing import Any

from peagle_deploy.spec.empty import check_not_empty


def option_name(param: Any) -> str:
    """How the user spells a parameter: its first option name, or the argument's name."""
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    if opts:
        return str(opts[0])
    return str(getattr(param, "metavar", None) or param.name).upper()


def apply_rules(command: Any, *, nested: bool = True) -> None:
    """Apply the rules to every parameter of `command` and (`nested`) its subcommands:
    refuse an empty value, show boolean flags plainly."""
    for param in getattr(command, "params", []):
        _guard(param)
        if getattr(param, "param_type_name", "") == "argument":
            _plain_argument(param)
    plain_flags(command)
    if nested:
        for sub in getattr(command, "commands", {}).values():
            apply_rules(sub)


def _guard(param: Any) -> None:
    if getattr(param, "_peagle_guarded", False):
        return
    process = param.process_value
    name = option_name(param)
    many = getattr(param, "multiple", False) or getattr(param, "nargs", 1) == -1

    def checked(ctx: Any, value: Any) -> Any:
        check_not_empty(name, value)
        if value is None and not param.required and param.callback is None:
            # Not given and no default: what click's own conversion of None gives. typer
            # would first build a pydantic TypeAdapter for the parameter's type, only to
            # return the same: about a millisecond per option of every command run.
            return () if many else None
        return process(ctx, value)

    param.process_value = checked
    param._peagle_guarded = True


def _plain_argument(param: Any) -> None:
    """`MODEL_OR_SPEC_FILE` in the usage line, `[MODEL]` when optional, `NAME...` for
    several: the usual notation, where typer shows `{MODEL_OR_SPEC_FILE}`, `{name}`."""
    param.metavar = param.metavar or str(param.name).upper()
    shown = param.metavar if param.required else f"[{param.metavar}]"
    shown += "..." if param.nargs != 1 else ""
    param.get_usage_pieces = lambda ctx: [shown]


def usage_error_line(exc: Any) -> str:
    """One line for a click/typer usage error: the problem and where help is."""
    text = str(exc.format_message()).strip().replace("\n", " ")
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        text += f" (see `{ctx.command_path} --help`)"
    return text


def plain_flags(command: Any) -> None:
    """Show boolean flags in help without a type (typer prints `<bool>` after `--json`,
    as if the flag took a value), in `command` and its --help."""
    for param in getattr(command, "params", []):
        if getattr(param, "is_flag", False) and not getattr(param, "count", False):
            param.metavar = ""
    help_option = getattr(command, "get_help_option", None)
    if help_option is not None and not getattr(help_option, "_peagle_plain", False):

        def plain_help_option(ctx: Any) -> Any:
            option = help_option(ctx)
            if option is not None:
                option.metavar = ""
            return option

        plain_help_option._peagle_plain = True  # type: ignore[attr-defined]
        command.get_help_option = plain_help_option
