"""Network isolation and the VPC the model containers run in."""

from __future__ import annotations

from peagle_deploy.deployment import Deployment
from peagle_deploy.findings import PlanWarning


def check_network(dep: Deployment) -> list[PlanWarning]:
    """Warn when a spec gives up network isolation (the secure default).

    Without EnableNetworkIsolation and without a VPC the container reaches the internet
    through SageMaker's own network; in a VPC, egress is whatever its routes allow.
    """
    spec = dep.spec
    if spec.network_isolation:
        return []
    in_vpc = spec.vpc is not None and bool(spec.vpc.subnet_ids)
    where = (
        "the VPC's routes decide its egress"
        if in_vpc
        else "with no vpc it has outbound internet access through SageMaker's network"
    )
    return [
        PlanWarning(
            "network_isolation",
            f"network_isolation is false: the model container can make network calls; {where}. "
            "P-EAGLE serving needs no network (weights and drafter come from S3)",
        )
    ]
