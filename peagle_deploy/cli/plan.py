"""`peagle models` and `peagle plan`: what can be deployed, and exactly how.

Neither command needs AWS credentials or imports an AWS SDK (JumpStart ids excepted:
resolving those loads the sagemaker SDK's JumpStart code).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from peagle_deploy.cli import output
from peagle_deploy.cli import spec_options as so
from peagle_deploy.cli.app import app

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON only.")]


@app.command("models")
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


@app.command("plan")
def plan_command(  # noqa: PLR0917 (one parameter per CLI flag)
    model: so.ModelArg = None,
    file: so.FileOpt = None,
    instance_type: so.InstanceTypeOpt = None,
    num_speculative_tokens: so.KOpt = None,
    mode: so.ModeOpt = None,
    tp: so.TpOpt = None,
    max_model_len: so.MaxLenOpt = None,
    instance_count: so.CountOpt = None,
    endpoint_name: so.EndpointNameOpt = None,
    stage: so.StageOpt = None,
    region: so.RegionOpt = None,
    role_arn: so.RoleOpt = None,
    env: so.EnvOpt = None,
    kms_key_id: so.KmsOpt = None,
    no_network_isolation: so.NoIsolationOpt = False,
    subnet: so.SubnetOpt = None,
    security_group: so.SecurityGroupOpt = None,
    routing_strategy: so.RoutingOpt = None,
    tag: so.TagOpt = None,
    image_uri: so.ImageOpt = None,
    accept_eula: so.AcceptEulaOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show the exact SageMaker requests a deployment would send (no AWS call)."""
    from peagle_deploy.plan import build_plan

    spec = so.load_cli_spec(
        file,
        model=model,
        instance_type=instance_type,
        num_speculative_tokens=num_speculative_tokens,
        mode=mode,
        tp=tp,
        max_model_len=max_model_len,
        instance_count=instance_count,
        endpoint_name=endpoint_name,
        stage=stage,
        region=region,
        role_arn=role_arn,
        env=env,
        kms_key_id=kms_key_id,
        no_network_isolation=no_network_isolation,
        subnet=subnet,
        security_group=security_group,
        routing_strategy=routing_strategy,
        tag=tag,
        image_uri=image_uri,
        accept_eula=accept_eula,
    )
    plan = build_plan(spec)
    if as_json:
        output.emit_json(plan.to_json())
        return
    _print_plan(plan)


def _print_plan(plan: Any) -> None:
    from rich.table import Table

    summary = Table(title=f"peagle plan: {plan.endpoint_name}", show_header=False)
    summary.add_column("field", style="bold")
    summary.add_column("value", overflow="fold")
    spec_cfg = plan.speculative_config
    rows = [
        ("model", f"{plan.spec.model} ({plan.model_source})"),
        ("region / stage", f"{plan.region} / {plan.spec.stage}"),
        ("instance", f"{plan.instance_type} x {plan.spec.initial_instance_count}"),
        ("tensor parallel", str(plan.tensor_parallel_size)),
        ("max model len", str(plan.max_model_len)),
        ("speculative", plan.spec.speculative.mode),
        ("K", str(plan.num_speculative_tokens) if spec_cfg else "-"),
        ("image", plan.image_uri),
        ("engine", f"vLLM {plan.vllm_version or '(unknown)'}: {plan.engine_known_by}"),
        ("model data", plan.model_data_uri),
        ("drafter", plan.drafter_uri or "-"),
        ("execution role", plan.execution_role_arn),
        ("model name", plan.model_name),
        ("endpoint config", plan.endpoint_config_name),
        ("content hash", plan.content_hash),
    ]
    for key, value in rows:
        summary.add_row(key, value)
    output.console.print(summary)
    shown = plan.to_json()  # secret-looking env values are redacted, as in --json
    for title, request in (
        ("CreateModel", shown["create_model"]),
        ("CreateEndpointConfig", shown["create_endpoint_config"]),
        ("CreateEndpoint", shown["create_endpoint"]),
        ("UpdateEndpoint (when the endpoint exists)", shown["update_endpoint"]),
    ):
        output.console.rule(title)
        output.console.print_json(data=request, indent=2)
    for warning in plan.warnings:
        output.warn(warning)
