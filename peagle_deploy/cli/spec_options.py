"""Spec flags shared by `peagle plan` and `peagle deploy`.

Each command declares the same options with these `Annotated` aliases and passes the
values to `spec_overrides()`, which turns them into `load_spec(path, **overrides)`
keyword arguments. Unset flags are None and never override the spec file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from peagle_deploy.errors import SpecError

ModelArg = Annotated[
    str | None,
    typer.Argument(
        help="Catalog key (see `peagle models`), JumpStart model id, or `custom`. "
        "Optional when the spec file names the model.",
        show_default=False,
        metavar="MODEL",
    ),
]
FileOpt = Annotated[
    Path | None,
    typer.Option("--file", "-f", help="Spec file (YAML or JSON); flags override it."),
]
InstanceTypeOpt = Annotated[
    str | None, typer.Option("--instance-type", "-i", help="SageMaker instance type.")
]
KOpt = Annotated[
    int | None,
    typer.Option("--num-speculative-tokens", "-k", help="K: draft tokens per step."),
]
ModeOpt = Annotated[
    str | None, typer.Option("--mode", help="Speculative mode: p-eagle, eagle3 or none.")
]
TpOpt = Annotated[int | None, typer.Option("--tp", help="Tensor-parallel degree.")]
MaxLenOpt = Annotated[int | None, typer.Option("--max-model-len", help="Max sequence length.")]
CountOpt = Annotated[int | None, typer.Option("--instance-count", help="Initial instance count.")]
EndpointNameOpt = Annotated[str | None, typer.Option("--endpoint-name", help="Endpoint name.")]
StageOpt = Annotated[str | None, typer.Option("--stage", help="Stage: dev, staging, prod, ...")]
RegionOpt = Annotated[str | None, typer.Option("--region", help="AWS region.")]
RoleOpt = Annotated[str | None, typer.Option("--role-arn", help="SageMaker execution role ARN.")]
EnvOpt = Annotated[
    list[str] | None,
    typer.Option("--env", "-e", help="Container env KEY=VALUE (repeatable).", show_default=False),
]
KmsOpt = Annotated[str | None, typer.Option("--kms-key-id", help="KMS key for the volume.")]
NoIsolationOpt = Annotated[
    bool,
    typer.Option("--no-network-isolation", help="Allow the container outbound network."),
]
SubnetOpt = Annotated[
    list[str] | None,
    typer.Option("--subnet", help="VPC subnet id (repeatable).", show_default=False),
]
SecurityGroupOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--security-group", help="VPC security group id (repeatable).", show_default=False
    ),
]
RoutingOpt = Annotated[
    str | None,
    typer.Option(
        "--routing-strategy",
        help="LEAST_OUTSTANDING_REQUESTS, RANDOM, PREFIX_AWARE or KV_AWARE.",
    ),
]
TagOpt = Annotated[
    list[str] | None,
    typer.Option("--tag", help="Resource tag KEY=VALUE (repeatable).", show_default=False),
]
ImageOpt = Annotated[str | None, typer.Option("--image-uri", help="Serving image override.")]
AcceptEulaOpt = Annotated[
    bool, typer.Option("--accept-eula", help="Accept the model's license (gated models).")
]


def parse_pairs(flag: str, values: list[str] | None) -> dict[str, str] | None:
    """`["A=1", "B=x=y"]` -> `{"A": "1", "B": "x=y"}`; SpecError names the flag."""
    if not values:
        return None
    pairs: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecError(flag, f"{item!r} is not KEY=VALUE", "KEY=VALUE")
        pairs[key] = value
    return pairs


def spec_overrides(
    *,
    model: str | None = None,
    instance_type: str | None = None,
    num_speculative_tokens: int | None = None,
    mode: str | None = None,
    tp: int | None = None,
    max_model_len: int | None = None,
    instance_count: int | None = None,
    endpoint_name: str | None = None,
    stage: str | None = None,
    region: str | None = None,
    role_arn: str | None = None,
    env: list[str] | None = None,
    kms_key_id: str | None = None,
    no_network_isolation: bool = False,
    subnet: list[str] | None = None,
    security_group: list[str] | None = None,
    routing_strategy: str | None = None,
    tag: list[str] | None = None,
    image_uri: str | None = None,
    accept_eula: bool = False,
) -> dict[str, Any]:
    """CLI flag values -> `load_spec` overrides (dotted keys; None means "not given")."""
    overrides: dict[str, Any] = {
        "model": model,
        "instance_type": instance_type,
        "speculative.num_speculative_tokens": num_speculative_tokens,
        "speculative.mode": mode,
        "tensor_parallel_size": tp,
        "max_model_len": max_model_len,
        "initial_instance_count": instance_count,
        "endpoint_name": endpoint_name,
        "stage": stage,
        "region": region,
        "execution_role_arn": role_arn,
        "env": parse_pairs("--env", env),
        "kms_key_id": kms_key_id,
        "network_isolation": False if no_network_isolation else None,
        "vpc.subnet_ids": subnet or None,
        "vpc.security_group_ids": security_group or None,
        "routing_strategy": routing_strategy,
        "tags": parse_pairs("--tag", tag),
        "image_uri": image_uri,
        "accept_eula": True if accept_eula else None,
    }
    return {k: v for k, v in overrides.items() if v is not None}


def load_cli_spec(file: Path | None, **flags: Any) -> Any:
    """Load the spec file (if any) with the flags on top; SpecError when no model is named."""
    from peagle_deploy.spec import load_spec

    overrides = spec_overrides(**flags)
    if file is None and "model" not in overrides:
        raise SpecError("model", "no model given", "a MODEL argument or --file with `model:`")
    return load_spec(file, **overrides)
