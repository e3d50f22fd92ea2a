"""`peagle models` and `peagle plan`: what can be deployed, and exactly how.

Neither command needs AWS credentials or imports an AWS SDK (JumpStart ids excepted:
resolving those loads the sagemaker SDK's JumpStart code).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from peagle_deploy.cli import output
from peagle_deploy.cli import spec_options as so
from peagle_deploy.cli.plan_json import (
    load_cli_spec,
    plan_document,
    plan_with_experiment,
    training_document,
)
from peagle_deploy.cli.spec_options import spec_options

JsonOpt = so.JsonOpt


def models_command(
    as_json: JsonOpt = False,
    instances: Annotated[
        bool, typer.Option("--instances", help="Show the instance-type catalog instead.")
    ] = False,
) -> None:
    """List the P-EAGLE launch models (or, with --instances, the GPU instance types).

    Values marked * are unverified defaults: override them in your spec.
    """
    from peagle_deploy.cli.catalog_view import (
        instances_json,
        instances_table,
        jumpstart_ids,
        models_json,
        models_table,
    )

    if as_json:
        output.emit_json(instances_json() if instances else models_json())
        return
    output.console.print(instances_table() if instances else models_table())
    if not instances:
        output.console.print("JumpStart ids:", highlight=False)
        for line in jumpstart_ids():
            output.console.print(f"  {line}", highlight=False)
    output.console.print("[dim]* unverified default: override it in your spec[/]")


PLAN_EXAMPLES = """\
Examples:

  peagle plan qwen3-coder-30b-a3b-instruct

  peagle plan gpt-oss-20b -k 7 --instance-type ml.g7e.4xlarge --json

  peagle plan -f stages/prod.yaml --role-arn arn:aws:iam::123456789012:role/sm

  peagle plan -f examples/train-qwen3-8b.yaml

Every flag sets the spec key named in its help; in a spec file the same keys are YAML.
A spec file whose top-level key is `train:` is a training spec: its plan is the
CreateTrainingJob request and its cost in instance-hours (it takes no MODEL or flags).
"""


@spec_options
def plan_command(
    *,
    model: so.ModelArg = None,
    file: so.FileOpt = None,
    knobs: dict[str, Any] | None = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the exact SageMaker requests a deployment would send (no AWS call)."""
    training = training_document(file, model, knobs or {})
    if training is not None:
        if as_json:
            output.emit_json(training)
        else:
            print_training_plan(training)
        return
    spec = load_cli_spec(file, model, knobs or {})
    plan, experiment = plan_with_experiment(spec)
    if as_json:
        output.emit_json(plan_document(plan, experiment))
        return
    _print_plan(plan)
    if experiment is not None:
        _print_experiment(experiment)


def print_training_plan(document: dict[str, Any]) -> None:
    """A training spec's plan: what the job is and costs, then the request it sends
    (`peagle plan --file TRAIN_SPEC`; `plan_document` of peagle_deploy.train.plan)."""
    from rich.table import Table

    request, cost = document["create_training_job"], document["cost"]
    resources, stopping = request["ResourceConfig"], request["StoppingCondition"]
    usd = cost["usd"]
    summary = Table(title=output.literal(f"peagle plan: {document['job_name']}"), show_header=False)
    summary.add_column("field", style="bold")
    summary.add_column("value", overflow="fold")
    spot = "on" if request["EnableManagedSpotTraining"] else "off"
    if "MaxWaitTimeInSeconds" in stopping:
        spot += f", waits at most {stopping['MaxWaitTimeInSeconds'] / 3600:g} h in all"
    rows = [
        ("instance", f"{resources['InstanceType']} x {resources['InstanceCount']}"),
        ("spot", spot),
        ("max runtime", f"{cost['max_runtime_hours']:g} h"),
        ("cost (at most)", f"{cost['instance_hours']:g} instance-hours"),
        ("price", "no sourced price in the catalog" if usd is None else f"{usd:.2f} USD"),
        ("target", _target_text(document["target"])),
        ("K trained", str(document["num_speculative_tokens"])),
        ("drafter (custom.drafter_uri)", document["drafter_uri"]),
        ("checkpoints", request["CheckpointConfig"]["S3Uri"]),
    ]
    for key, value in rows:
        summary.add_row(key, output.literal(value))
    output.console.print(summary)
    output.console.rule("CreateTrainingJob")
    output.console.print_json(data=request, indent=2)
    for warning in document["warnings"]:
        output.warn(warning)


def _target_text(target: dict[str, Any]) -> str:
    """The architecture the plan checked, and the mask token the drafter will use."""
    mask = {
        "spec": "stated",
        "tokenizer": "the tokenizer's",
        "added": "<|MASK|> added in an unused row",
        "unknown": "decided by the job",
    }.get(target["mask_source"], target["mask_source"])
    shown = f" {target['mask_token_id']}" if target["mask_token_id"] is not None else ""
    return (
        f"{target['model_type']}, hidden {target['hidden_size']}, "
        f"{target['num_hidden_layers']} layers, vocabulary {target['vocab_size']} "
        f"({target['known_by']}); mask token{shown}: {mask}"
    )


def _print_experiment(experiment: dict[str, Any]) -> None:
    """The experiment's requests (`peagle experiment start` sends them)."""
    variants = experiment["variants"]
    output.console.print(
        output.literal(
            f"experiment ({experiment['mode']}): incumbent {variants['incumbent']['variant']} "
            f"x {variants['incumbent']['instances']}, candidate "
            f"{variants['candidate']['variant']} x {variants['candidate']['instances']}; "
            f"observations from {experiment['observations']}"
        )
    )
    for title, key in (
        ("experiment: CreateModel (the candidate)", "create_candidate_model"),
        ("experiment: CreateInferenceExperiment (shadow)", "create_inference_experiment"),
        ("experiment: CreateEndpointConfig (both variants)", "create_endpoint_config"),
        ("experiment: UpdateEndpoint (start)", "start_update_endpoint"),
        ("experiment: UpdateEndpoint (restore the incumbent)", "restore_update_endpoint"),
    ):
        if key in experiment:
            output.console.rule(title)
            output.console.print_json(data=experiment[key], indent=2)
    _print_set_ups(experiment.get("set_ups") or [])
    for warning in experiment["warnings"]:
        output.warn(warning)


def _print_set_ups(rows: list[dict[str, Any]]) -> None:
    """What each set-up the rule accepts would cost on this endpoint."""
    from rich.table import Table

    table = Table(title="set-ups the decision accepts here (the chosen one marked)")
    for column in ("", "set-up", "extra instances", "smallest gain promoted", "extra hours"):
        table.add_column(column)
    counted = any("blocks_count" in r for r in rows)
    if counted:
        table.add_column("blocks fill at the expected traffic")
    for r in rows:
        share = r.get("sampling_percent", r.get("weight_percent"))
        hours = r["extra_instance_hours"]
        cells = [
            "*" if r["chosen"] else "",
            f"{r['mode']} {share}%, {r['extra_instances']} candidate",
            str(r["extra_instances"]),
            f"+{r['smallest_gain_promoted_percent']:g}%",
            f"{hours['first_look']:g} to {hours['at_most']:g}",
        ]
        if counted:
            cells.append(
                f"{'yes' if r['blocks_count'] else 'no'} "
                f"({r['candidate_requests_per_block']:g} requests)"
            )
        table.add_row(*cells)
    output.console.print(table)


def register(app: typer.Typer) -> None:
    """Add `peagle models` and `peagle plan` to the root app."""
    app.command("models")(models_command)
    app.command("plan", epilog=PLAN_EXAMPLES)(plan_command)


def _print_plan(plan: Any) -> None:
    from rich.table import Table

    summary = Table(title=output.literal(f"peagle plan: {plan.endpoint_name}"), show_header=False)
    summary.add_column("field", style="bold")
    summary.add_column("value", overflow="fold")
    speculative_config = plan.speculative_config
    rows = [
        ("model", f"{plan.spec.model} ({plan.model_source})"),
        ("region / stage", f"{plan.region} / {plan.spec.stage}"),
        ("instance", f"{plan.instance_type} x {plan.spec.initial_instance_count}"),
        ("scaling", _scaling_text(plan.spec.scaling)),
        ("rollout", _rollout_text(plan.rollout)),
        ("tensor parallel", str(plan.tensor_parallel_size)),
        ("max model len", _max_model_len_text(plan.max_model_len)),
        ("speculative", plan.spec.speculative.mode),
        ("K", str(plan.num_speculative_tokens) if speculative_config else "-"),
        ("image", plan.image_uri),
        ("engine", f"vLLM {plan.vllm_version or '(unknown)'}: {plan.engine_known_by}"),
        ("model data", plan.model_data_uri),
        ("drafter", plan.drafter_uri or "-"),
        ("execution role", plan.execution_role_arn),
        *(
            (f"secret {name}", f"{ref} (read at CreateModel; not in any output)")
            for name, ref in sorted(plan.secret_refs.items())
        ),
        ("model name", plan.model_name),
        ("endpoint config", plan.endpoint_config_name),
        ("content hash", plan.content_hash),
    ]
    for key, value in rows:
        summary.add_row(key, output.literal(value))  # user values: never read as markup
    output.console.print(summary)
    shown = plan.to_json()  # secret-looking env values are redacted, as in --json
    for title, request in (
        ("CreateModel", shown["create_model"]),
        ("CreateEndpointConfig", shown["create_endpoint_config"]),
        ("CreateEndpoint", shown["create_endpoint"]),
        ("UpdateEndpoint (when the endpoint exists)", shown["update_endpoint"]),
        *(
            (f"Application Auto Scaling {title} (once InService)", plan.autoscaling[key])
            for title, key in (
                ("RegisterScalableTarget", "register_scalable_target"),
                ("PutScalingPolicy", "put_scaling_policy"),
            )
            if plan.autoscaling
        ),
    ):
        output.console.rule(title)
        output.console.print_json(data=request, indent=2)
    for warning in plan.warnings:
        output.warn(warning)


def _max_model_len_text(max_model_len: int | None) -> str:
    if max_model_len is None:
        return "the model's own (vLLM reads it from the model's config)"
    return str(max_model_len)


def _scaling_text(scaling: Any) -> str:
    if scaling is None:
        return "fixed instance count (no autoscaling)"
    return (
        f"{scaling.min_instances}-{scaling.max_instances} instances, target "
        f"{scaling.target_invocations_per_instance} invocations/instance/minute"
    )


def _rollout_text(rollout: Any) -> str:
    step = {
        "canary": f" {rollout.canary_percent}%",
        "linear": f" {rollout.linear_step_percent}% steps",
    }.get(rollout.strategy, "")
    alarms = f", rollback on {', '.join(rollout.alarms)}" if rollout.alarms else ""
    return f"{rollout.strategy}{step}, every {rollout.wait_interval_s} s{alarms}"
