"""Image: the serving image exists and its tag resolves, in the registry the region needs.

A private image (in the caller's account) is looked up with ecr:DescribeImages. An
image in another account (an AWS Deep Learning Containers image, or a shared registry)
is looked up with ecr:BatchGetImage, the read that pulls use and that registry policies
grant across accounts. The vLLM DLC image must come from the DLC registry account of the
endpoint's region, as `peagle_deploy.catalog.images` knows it.
"""

from __future__ import annotations

from dataclasses import dataclass

from peagle_deploy.catalog.images import VLLM_REPOSITORY, Registry, parse_image_uri, registries
from peagle_deploy.doctor.context import (
    DoctorContext,
    could_not_check,
    error_code,
)
from peagle_deploy.doctor.result import CheckResult, failed, passed, warned


@dataclass(frozen=True)
class ImageRef:
    """A parsed ECR image URI."""

    account: str
    region: str
    domain: str
    repository: str
    tag: str | None
    digest: str | None

    @property
    def image_id(self) -> dict[str, str]:
        """The ECR imageIds entry (`latest` when neither tag nor digest is given)."""
        if self.digest:
            return {"imageDigest": self.digest}
        return {"imageTag": self.tag or "latest"}

    @property
    def reference(self) -> str:
        return self.digest or self.tag or "latest"

    def repository_arn(self, partition: str) -> str:
        return f"arn:{partition}:ecr:{self.region}:{self.account}:repository/{self.repository}"


def parse_image(uri: str) -> ImageRef | None:
    """The ECR parts of an image URI; None for anything that is not a private ECR image."""
    parsed = parse_image_uri(uri)
    if parsed is None:
        return None
    return ImageRef(
        account=parsed.account,
        region=parsed.region,
        domain=parsed.domain,
        repository=parsed.repository,
        tag=parsed.tag,
        digest=parsed.digest,
    )


def expected_dlc(region: str) -> Registry | None:
    """The Deep Learning Containers registry of `region` (account and domain), if any."""
    return registries().get(region)


def _dlc_problem(ctx: DoctorContext, image: ImageRef) -> CheckResult | None:
    """A vLLM DLC image from the wrong registry account or domain for the region."""
    dlc = expected_dlc(ctx.region)
    if dlc is None or image.repository != VLLM_REPOSITORY or image.account == ctx.account_id:
        return None
    if (image.account, image.domain) != (dlc.account, dlc.domain):
        right = (
            f"{dlc.account}.dkr.ecr.{ctx.region}.{dlc.domain}/{image.repository}:{image.reference}"
        )
        return failed(
            "image.exists",
            ctx.plan.image_uri,
            f"the vLLM DLC image of {ctx.region} is in account {dlc.account} ({dlc.domain}), "
            f"not {image.account} ({image.domain})",
            f"use {right}",
        )
    return None


def check_image(ctx: DoctorContext) -> list[CheckResult]:
    """The image's registry, region and tag."""
    uri = ctx.plan.image_uri
    image = parse_image(uri)
    if image is None:
        return [
            failed(
                "image.exists",
                uri,
                "not a private ECR image; SageMaker hosting pulls from ECR",
                "push the image to ECR in the endpoint's region",
            )
        ]
    if image.region != ctx.region:
        # botocore's sagemaker model (ContainerDefinition.Image): the image must be in
        # the region of the model or endpoint.
        return [
            failed(
                "image.exists",
                uri,
                f"the image is in {image.region}, the endpoint in {ctx.region}",
                f"use an image from ECR in {ctx.region}",
            )
        ]
    wrong_registry = _dlc_problem(ctx, image)
    if wrong_registry is not None:
        return [wrong_registry]
    own = image.account == ctx.account_id
    try:
        problem = _look_up(ctx, image, uri, own)
    except Exception as exc:
        return [_lookup_failed(exc, image, uri, ctx, own)]
    if problem is not None:
        return [problem]
    where = "private image" if own else f"image in registry {image.account}"
    return [passed("image.exists", uri, f"{where}; {image.reference} resolves")]


_MANIFEST_TYPES = [
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
]


def _look_up(ctx: DoctorContext, image: ImageRef, uri: str, own: bool) -> CheckResult | None:
    """Resolve the tag or digest in ECR: DescribeImages in the account's own registry,
    BatchGetImage (what a pull needs) in another's. None when it resolves."""
    ecr = ctx.client("ecr", image.region)
    if own:
        ecr.describe_images(
            registryId=image.account, repositoryName=image.repository, imageIds=[image.image_id]
        )
        return None
    response = ecr.batch_get_image(
        registryId=image.account,
        repositoryName=image.repository,
        imageIds=[image.image_id],
        acceptedMediaTypes=_MANIFEST_TYPES,
    )
    failures = response.get("failures") or []
    if not failures or response.get("images"):
        return None
    code = str(failures[0].get("failureCode", ""))
    if code in ("ImageNotFound", "ImageTagDoesNotMatchDigest"):
        return _tag_missing(image, uri)
    return warned(
        "image.exists", uri, f"could not check: {code}: {failures[0].get('failureReason', '')}"
    )


def _lookup_failed(
    exc: Exception, image: ImageRef, uri: str, ctx: DoctorContext, own: bool
) -> CheckResult:
    code = error_code(exc)
    if code == "ImageNotFoundException":
        return _tag_missing(image, uri)
    if code == "RepositoryNotFoundException":
        return failed(
            "image.exists",
            uri,
            f"repository {image.repository} does not exist in registry {image.account}",
            "push the image, or fix the image URI",
        )
    what = "ecr:DescribeImages" if own else "ecr:BatchGetImage"
    return could_not_check(
        "image.exists",
        uri,
        exc,
        denied=f"the caller may not call {what} on the repository",
        fix=f"grant the caller {what} on {image.repository_arn(ctx.partition)}",
        failed=f"{what} failed",
    )


def _tag_missing(image: ImageRef, uri: str) -> CheckResult:
    return failed(
        "image.exists",
        uri,
        f"{image.reference} does not resolve in {image.repository} (registry {image.account})",
        "push the image with that tag, or use a tag that exists",
    )
