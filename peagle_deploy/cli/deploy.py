"""`peagle deploy | status | invoke | list | delete`: the SDK's lifecycle from a shell.

boto3 and the SDK are imported inside the commands (CLI start-up stays fast). Every
command prints one JSON document with `--json`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.markup import escape

from peagle_deploy.cli import output
from peagle_deploy.cli import spec_options as so
from peagle_deploy.cli.plan_json import load_cli_spec
from peagle_deploy.cli.spec_options import spec_options
from peagle_deploy.errors import InputError, PeagleError
from peagle_deploy.terminal import harmless

JsonOpt = so.JsonOpt
NameArg = Annotated[str, typer.Argument(help="Endpoint name.", show_default=False)]
MAX_WAIT_S = 86400.0
"""Longest --timeout: a day, well past any SageMaker change (a blue/green rollout may
run 8 h: MaximumExecutionTimeoutInSeconds <= 28800)."""
MAX_TOKENS = 2**31 - 1
MAX_REPEAT = 100_000
"""`invoke --repeat` at most (sequential requests; more is a load test: `peagle bench`)."""
"""Largest --max-tokens sent (a 32-bit integer; the server caps it by max_model_len)."""
MAX_TEMPERATURE = 100.0
"""Largest --temperature sent (vLLM takes any value >= 0; beyond this it is noise)."""
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        min=1.0,
        max=MAX_WAIT_S,
        help="Seconds to wait before giving up watching (not deploying).",
    ),
]
ProgressOpt = Annotated[
    bool, typer.Option("--no-progress", help="No progress display, even on a terminal.")
]


def _check_endpoint(name: str, region: str | None) -> None:
    """NAME and --region, refused before any AWS call, naming the argument or flag."""
    from peagle_deploy.validation.aws_shapes import check_endpoint_name, check_region

    check_endpoint_name(name, "NAME")
    if region is not None:
        check_region(region, "--region")


def _say(line: str) -> None:
    """A plain line on stdout: names from AWS are printed as they are (no markup)."""
    output.console.print(line, highlight=False, markup=False)


def _interrupted(exc: BaseException | str) -> typer.Exit:
    """Ctrl-C: the message says how to resume; exit 130 like any interrupted command."""
    output.warn(str(exc))
    return typer.Exit(130)


DEPLOY_EXAMPLES = """\
Examples:

  peagle deploy qwen3-coder-30b-a3b-instruct -k 3 --role-arn arn:aws:iam::123456789012:role/sm

  peagle deploy -f stages/prod.yaml --rollout canary --alarm peagle-prod-5xx

  peagle deploy gpt-oss-20b --role-arn ROLE_ARN --dry-run     # what would it do?
"""


@spec_options
def deploy_command(
    *,
    model: so.ModelArg = None,
    file: so.FileOpt = None,
    knobs: dict[str, Any] | None = None,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Return once SageMaker accepted the requests.")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Only read: say what deploy would do, and what `peagle doctor` finds. A "
            "preview: failing checks are shown, not fatal (a real deploy stops on them).",
        ),
    ] = False,
    no_doctor: Annotated[
        bool, typer.Option("--no-doctor", help="Skip the read-only checks of `peagle doctor`.")
    ] = False,
    timeout: TimeoutOpt = None,
    no_progress: ProgressOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Create the endpoint, update it blue/green, or confirm it already serves the spec.

    Waits until InService (Ctrl-C stops watching, not the deployment). A create that
    fails is cleaned up and explained (FailureReason + container log lines); an update
    that rolls back leaves the old config serving.
    """
    from peagle_deploy.plan import build_plan
    from peagle_deploy.sdk import Interrupted, check_deployable_role, deploy_peagle

    plan = build_plan(load_cli_spec(file, model, knobs or {}))
    if not dry_run:
        check_deployable_role(plan)  # before any AWS call, one clear line
    if not as_json:
        _warn_before_deploy(plan)
    try:
        endpoint = deploy_peagle(
            plan=plan,
            wait=not no_wait,
            dry_run=dry_run,
            timeout_s=timeout,
            progress=False if (no_progress or as_json) else None,
            deployed_by="peagle deploy",
            doctor=not no_doctor,
        )
    except Interrupted as exc:
        raise _interrupted(exc) from None
    outcome = endpoint.deployment
    assert outcome is not None
    if as_json:
        output.emit_json(outcome.to_json())
    elif outcome.dry_run:
        _print_dry_run(outcome, plan)
    else:
        _print_deployed(outcome)


def _warn_before_deploy(plan: Any) -> None:
    """The plan's warnings, and that an experiment is not started by deploy."""
    for warning in plan.warnings:
        output.warn(warning)
    if plan.spec.experiment is not None:
        output.warn(
            "experiment: deploy serves the spec's own settings; start the experiment "
            f"with `peagle experiment start {plan.endpoint_name} --file SPEC`"
        )


def _print_dry_run(outcome: Any, plan: Any) -> None:
    """What deploy would do, and the warnings the plan did not already give."""
    would = {
        "create": "create",
        "update": "update (blue/green)",
        "resume": "wait for the deployment in progress on",
        "recreate": "delete and re-create the Failed endpoint",
    }
    if outcome.action == "noop":
        line = (
            f"nothing to do: {outcome.endpoint_name} ({outcome.status}) already serves "
            f"config {outcome.endpoint_config_name}"
        )
    else:
        line = (
            f"would {would[outcome.action]} {outcome.endpoint_name} "
            f"(now {outcome.status}) -> config {outcome.endpoint_config_name}"
        )
    output.console.print(f"[bold]dry run:[/] {escape(line)}", highlight=False)
    shown = {str(w) for w in plan.warnings}  # printed before the deploy
    for extra in outcome.warnings:
        if extra not in shown:
            output.warn(extra)


def _print_deployed(outcome: Any) -> None:
    """What deploy did: the endpoint, its status and config, and what it left."""
    verb = {
        "create": "created",
        "update": "updated",
        "noop": "unchanged (already serves this spec)",
        "resume": "finished (waited for the deployment in progress)",
        "recreate": "re-created (the Failed endpoint was replaced)",
    }[outcome.action]
    output.console.print(
        f"[bold]{escape(outcome.endpoint_name)}[/] "
        + escape(
            f"{verb}: {outcome.status} on {outcome.endpoint_config_name} "
            f"({outcome.region}, stage {outcome.stage})"
        ),
        highlight=False,
    )
    if outcome.status != "InService":
        _say(f"not waiting; watch it with `peagle status {outcome.endpoint_name} --wait`")
    if outcome.removed:
        _say(f"removed: {', '.join(outcome.removed)}")
    if outcome.manifest_parameter:
        _say(f"manifest: {outcome.manifest_parameter}")


def status_command(  # noqa: PLR0917 (one parameter per CLI flag)
    name: NameArg,
    region: so.RegionOpt = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait until InService, Failed or OutOfService.")
    ] = False,
    timeout: TimeoutOpt = None,
    no_progress: ProgressOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show an endpoint's status (exit 1 if it settled Failed when --wait is given)."""
    from peagle_deploy.sdk import PeagleEndpoint, WaitInterrupted

    _check_endpoint(name, region)
    endpoint = PeagleEndpoint.from_name(name, region=region)
    try:
        if wait:
            endpoint.wait(
                timeout_s=timeout or 3600.0,
                progress=False if (no_progress or as_json) else None,
            )
        desc = endpoint.describe()
    except WaitInterrupted as exc:
        raise _interrupted(exc) from None
    except KeyboardInterrupt:  # DescribeEndpoint in flight, without --wait
        raise _interrupted(
            f"interrupted; watch {name} with `peagle status {name} --wait`"
        ) from None
    status = str(desc["EndpointStatus"])
    log_lines = endpoint.logs(limit=20) if status == "Failed" else []
    data = {
        "endpoint_name": name,
        "status": status,
        "endpoint_config_name": desc.get("EndpointConfigName"),
        "pending_endpoint_config_name": (desc.get("PendingDeploymentSummary") or {}).get(
            "EndpointConfigName"
        ),
        "failure_reason": desc.get("FailureReason"),
        "created": str(desc.get("CreationTime", "")),
        "last_modified": str(desc.get("LastModifiedTime", "")),
        "variants": [
            {
                "name": v.get("VariantName"),
                "current_instance_count": v.get("CurrentInstanceCount"),
                "desired_instance_count": v.get("DesiredInstanceCount"),
            }
            for v in desc.get("ProductionVariants", [])
        ],
        "log_tail": log_lines,
        "manifest": _manifest_summary(endpoint),
        "region": endpoint.region,
    }
    if as_json:
        output.emit_json(data)
    else:
        _print_status(data)
    if wait and status in ("Failed", "OutOfService"):
        raise typer.Exit(1)


def _manifest_summary(endpoint: Any) -> dict[str, Any] | None:
    """The endpoint's deployment manifest in brief; an unreadable one is shown, not fatal
    (missing permission, a record that cannot be trusted)."""
    try:
        found = endpoint.manifest()
    except Exception as exc:
        return {"error": str(exc)}
    if found is None:
        return None
    return {
        "parameter": found.parameter_name,
        "content_hash": found.content_hash,
        "endpoint_config_name": found.endpoint_config_name,
        "deployed_at": found.deployed_at.isoformat(),
        "deployed_by": found.deployed_by,
        "git_commit": found.git_commit,
        "promoted_from": found.promoted_from,
    }


def _print_status(data: dict[str, Any]) -> None:
    """`peagle status` for a human: the status, the configs, a failure and the manifest."""
    status = data["status"]
    color = {"InService": "green", "Failed": "red"}.get(status, "yellow")
    output.console.print(
        f"[bold]{escape(data['endpoint_name'])}[/]: [{color}]{escape(status)}[/]",
        highlight=False,
    )
    _say(f"config: {data['endpoint_config_name']}")
    if data["pending_endpoint_config_name"]:
        _say(f"rolling to: {data['pending_endpoint_config_name']}")
    if data["failure_reason"]:
        output.console.print(
            f"reason: {harmless(data['failure_reason'])}", highlight=False, markup=False
        )
    for line in data["log_tail"]:  # the container's own output: colours and all, escaped
        output.console.print(f"  {harmless(line)}", highlight=False, markup=False)
    manifest = data["manifest"]
    if manifest and "error" in manifest:
        output.warn(f"manifest not readable: {manifest['error']}")
    elif manifest:
        stale = manifest["endpoint_config_name"] != data["endpoint_config_name"]
        line = (
            f"manifest: spec {manifest['content_hash']} deployed "
            f"{manifest['deployed_at']} by {manifest['deployed_by'] or '-'}"
        )
        if manifest["promoted_from"]:
            line += f" (promoted from {manifest['promoted_from']})"
        line = escape(line)
        if stale:
            line += " [yellow](describes another config: stale)[/]"
        output.console.print(line, highlight=False)


def invoke_command(  # noqa: PLR0917 (one parameter per CLI flag)
    name: NameArg,
    prompt: Annotated[str, typer.Argument(help="User message.", show_default=False)],
    region: so.RegionOpt = None,
    stream: Annotated[
        bool, typer.Option("--stream", help="Stream the answer (InvokeEndpointWithResponseStream).")
    ] = False,
    max_tokens: Annotated[
        int,
        typer.Option("--max-tokens", min=1, max=MAX_TOKENS, help="Longest answer, in tokens."),
    ] = 256,
    temperature: Annotated[
        float | None,
        typer.Option("--temperature", help="Sampling temperature (default: the server's)."),
    ] = None,
    system: Annotated[str | None, typer.Option("--system", help="System message.")] = None,
    repeat: Annotated[
        int,
        typer.Option(
            "--repeat",
            min=1,
            max=MAX_REPEAT,
            help="Send it this many times, one after the other, and print a summary "
            "(traffic for a trial, e.g. an experiment).",
        ),
    ] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Send one chat message (OpenAI chat-completions payload) and print the answer."""
    from peagle_deploy.sdk import PeagleEndpoint

    _check_endpoint(name, region)
    if temperature is not None and not 0.0 <= temperature <= MAX_TEMPERATURE:
        raise InputError(
            "--temperature", f"{temperature} is out of range", f"0-{MAX_TEMPERATURE:g}"
        )
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": prompt})
    params: dict[str, Any] = {"max_tokens": max_tokens}
    if temperature is not None:
        params["temperature"] = temperature
    endpoint = PeagleEndpoint.from_name(name, region=region)
    if repeat > 1:
        _repeat(endpoint, messages, params, repeat=repeat, stream=stream, as_json=as_json)
        return
    shown = _answer_view()
    if stream:
        chat_stream = endpoint.stream(messages, **params)
        for delta in chat_stream:
            if not as_json:
                sys.stdout.write(shown(delta))
                sys.stdout.flush()
        if as_json:
            output.emit_json(
                {
                    "endpoint_name": name,
                    "text": chat_stream.text,
                    "finish_reason": chat_stream.finish_reason,
                    "usage": chat_stream.usage,
                }
            )
        else:
            sys.stdout.write("\n")
        return
    result = endpoint.chat(messages, **params)
    if as_json:
        output.emit_json(result.raw)
    else:
        sys.stdout.write(shown(result.text) + "\n")


def _answer_view() -> Callable[[str], str]:
    """How the model's answer is written: on a terminal, with every control character but
    newline and tab shown escaped (an answer is text the endpoint chose: an escape
    sequence in it could retitle the window, hide lines or write a hyperlink); into a
    pipe or a file, exactly as the endpoint sent it (the bytes are the data)."""
    return harmless if sys.stdout.isatty() else str


def _repeat(
    endpoint: Any,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    *,
    repeat: int,
    stream: bool,
    as_json: bool,
) -> None:
    """Send the same message `repeat` times; one summary; exit 1 when any failed."""
    answered = tokens = 0
    failures: list[str] = []
    for _ in range(repeat):
        try:
            if stream:
                chat_stream = endpoint.stream(messages, **params)
                for _delta in chat_stream:
                    pass
                usage = chat_stream.usage
            else:
                usage = endpoint.chat(messages, **params).usage
        except PeagleError as exc:
            failures.append(str(exc))
            continue
        answered += 1
        tokens += int((usage or {}).get("completion_tokens") or 0)
    summary = {
        "endpoint_name": endpoint.endpoint_name,
        "sent": repeat,
        "answered": answered,
        "failed": len(failures),
        "completion_tokens": tokens,
        "first_failure": failures[0] if failures else None,
    }
    if as_json:
        output.emit_json(summary)
    else:
        _say(f"{endpoint.endpoint_name}: sent {repeat}, answered {answered}, {tokens} tokens")
        if failures:
            output.warn(f"{len(failures)} failed; the first: {failures[0]}")
    if failures:
        raise typer.Exit(1)


def list_command(
    region: so.RegionOpt = None,
    stage: so.StageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The project's endpoints (tag peagle:managed=true), optionally of one stage."""
    from peagle_deploy.sdk import list_endpoints
    from peagle_deploy.spec.stage import check_stage_name
    from peagle_deploy.validation.aws_shapes import check_region

    if region is not None:
        check_region(region, "--region")
    if stage is not None:
        check_stage_name(stage, "--stage")
    found = list_endpoints(region=region, stage=stage)
    if as_json:
        output.emit_json([e.to_json() for e in found])
        return
    if not found:
        output.console.print("no peagle-managed endpoints found")
        return
    from rich.table import Table

    table = Table(title="peagle endpoints")
    for column in ("name", "status", "stage", "model", "spec hash", "created"):
        table.add_column(column)
    for e in found:
        cells = (e.name, e.status, e.stage or "-", e.model or "-", e.spec_hash or "-", e.created)
        table.add_row(*(output.literal(cell) for cell in cells))  # AWS tags: shown as is
    output.print_table(table)


def delete_command(
    name: NameArg,
    region: so.RegionOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete an endpoint with its endpoint configs, models and manifest (gone is fine)."""
    from peagle_deploy.sdk import PeagleEndpoint

    _check_endpoint(name, region)
    if not yes:
        if as_json or not sys.stdin.isatty():
            raise PeagleError(f"refusing to delete {name} without --yes (no terminal to confirm)")
        if not typer.confirm(f"Delete endpoint {name}, its endpoint configs, models and manifest?"):
            raise typer.Exit(1)
    result = PeagleEndpoint.from_name(name, region=region).delete()
    if as_json:
        output.emit_json(result.to_json())
        return
    if result.endpoint_deleted:
        _say(f"deleting endpoint {name}")
    else:
        _say(f"endpoint {name} was already gone")
    for config in result.endpoint_configs:
        _say(f"deleted endpoint config {config}")
    for model in result.models:
        _say(f"deleted model {model}")
    for target in result.scalable_targets:
        _say(f"deregistered autoscaling target {target}")
    if result.manifest_parameter:
        _say(f"deleted manifest {result.manifest_parameter}")
    if result.manifest_error:
        output.warn(f"the deployment manifest could not be deleted: {result.manifest_error}")


def register(app: typer.Typer) -> None:
    """Add the endpoint lifecycle commands to the root app."""
    app.command("deploy", epilog=DEPLOY_EXAMPLES)(deploy_command)
    app.command("status")(status_command)
    app.command("invoke")(invoke_command)
    app.command("list")(list_command)
    app.command("delete")(delete_command)
