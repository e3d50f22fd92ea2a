"""`peagle image`: the project's serving image (Dockerfile), per region.

`peagle image base --region R` prints the reference to build FROM in R: AWS's vLLM
SageMaker image the Dockerfile pins (its `ai.peagle.base-tag` label), in R's Deep
Learning Containers registry, from the catalog (images.json). The account differs by
region, so no single default in the Dockerfile can be right everywhere.
"""

from __future__ import annotations

from typing import Annotated

import typer

from peagle_deploy.cli import output

image_app = typer.Typer(
    name="image",
    help="The project's vLLM serving image (Dockerfile): what to build it FROM, per region.",
    no_args_is_help=True,
    add_completion=False,
)

BASE_EXAMPLES = """\
Examples:

  peagle image base --region eu-south-1

  BASE=$(peagle image base --region "$REGION")
  aws ecr get-login-password --region "$REGION" |
    docker login --username AWS --password-stdin "${BASE%%/*}"
  DOCKER_BUILDKIT=1 docker build --build-arg BASE_IMAGE="$BASE" \\
    -t peagle-vllm .

or `make image REGION=eu-south-1`.
"""


@image_app.command("base", epilog=BASE_EXAMPLES)
def base_command(
    region: Annotated[
        str | None,
        typer.Option(
            "--region",
            help="AWS region to build for (default: AWS_REGION, AWS_DEFAULT_REGION, us-east-1, "
            "as `peagle plan`).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Print the base image reference for `docker build --build-arg BASE_IMAGE=...`."""
    from peagle_deploy.catalog.images import images, own_base_uri, own_image, registries
    from peagle_deploy.catalog.resolve import DEFAULT_REGION, environment_region
    from peagle_deploy.validation.aws_shapes import check_region

    found = None if region is not None else environment_region()
    field = "--region" if found is None else found[0]
    value = region if region is not None else (found[1] if found else DEFAULT_REGION)
    check_region(value, field)
    uri = own_base_uri(value, field)
    if not as_json:
        output.console.print(uri, highlight=False, markup=False, soft_wrap=True)
        return
    tag = own_image()["base_tag"]
    registry = registries()[value]
    output.emit_json(
        {
            "region": value,
            "image": uri,
            "registry": uri.split("/", 1)[0],
            "account": registry.account,
            "tag": tag,
            "vllm": images()[tag].vllm,
            "source": images()[tag].source,
        }
    )


def register(app: typer.Typer) -> None:
    """Add `peagle image` to the root app."""
    app.add_typer(image_app, name="image")
