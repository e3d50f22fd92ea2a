"""Target-tracking autoscaling of the endpoint variant, from the plan's requests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import CfnResource
from aws_cdk import aws_applicationautoscaling as aas
from constructs import Construct

from peagle_deploy.errors import PeagleError


class EndpointAutoscaling(Construct):
    """RegisterScalableTarget + PutScalingPolicy exactly as the plan renders them.

    The plan's `autoscaling` holds the SDK's two requests (min/max from
    `spec.scaling`, target tracking on `SageMakerVariantInvocationsPerInstance`); this
    construct declares the same two things. L1 resources on purpose: without a
    RoleARN, Application Auto Scaling uses its SageMaker service-linked role (which
    it creates on first use), whereas the L2 ScalableTarget would create a role with
    no permissions. The target is registered after the endpoint exists.

    `suspended`: while the stage's experiment runs, the target's scaling is suspended
    (SuspendedState: scale in, scale out and scheduled actions), so the incumbent's fleet
    stays the size of the candidate's for the whole test. SuspendedState is always
    written, `false` otherwise: RegisterScalableTarget leaves any parameter a call leaves
    out unchanged (botocore's application-autoscaling model), so a suspension is lifted
    only by saying so (docs/platform-facts.md, "Autoscaling and an experiment").
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        autoscaling: Mapping[str, Any],
        endpoint: CfnResource,
        suspended: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        target_req = autoscaling["register_scalable_target"]
        policy_req = autoscaling["put_scaling_policy"]
        if target_req["MinCapacity"] > target_req["MaxCapacity"]:
            raise PeagleError(
                f"scaling.min_instances ({target_req['MinCapacity']}) is above "
                f"scaling.max_instances ({target_req['MaxCapacity']})"
            )
        self.target = aas.CfnScalableTarget(
            self,
            "Target",
            service_namespace=target_req["ServiceNamespace"],
            resource_id=target_req["ResourceId"],
            scalable_dimension=target_req["ScalableDimension"],
            min_capacity=target_req["MinCapacity"],
            max_capacity=target_req["MaxCapacity"],
            suspended_state=aas.CfnScalableTarget.SuspendedStateProperty(
                dynamic_scaling_in_suspended=suspended,
                dynamic_scaling_out_suspended=suspended,
                scheduled_scaling_suspended=suspended,
            ),
        )
        self.target.node.add_dependency(endpoint)
        tracking = policy_req["TargetTrackingScalingPolicyConfiguration"]
        predefined = tracking["PredefinedMetricSpecification"]
        self.policy = aas.CfnScalingPolicy(
            self,
            "Policy",
            policy_name=policy_req["PolicyName"],
            policy_type=policy_req["PolicyType"],
            scaling_target_id=self.target.ref,
            target_tracking_scaling_policy_configuration=(
                aas.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                    target_value=tracking["TargetValue"],
                    predefined_metric_specification=aas.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                        predefined_metric_type=predefined["PredefinedMetricType"],
                        resource_label=predefined.get("ResourceLabel"),
                    ),
                    scale_in_cooldown=tracking.get("ScaleInCooldown"),
                    scale_out_cooldown=tracking.get("ScaleOutCooldown"),
                    disable_scale_in=tracking.get("DisableScaleIn"),
                )
            ),
        )
