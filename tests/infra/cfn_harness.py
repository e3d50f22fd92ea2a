"""A stand-in for CloudFormation: a synthesized stage template's stack operations,
played against the emulator (`peagle_local.emulator.LocalAWS`).

moto has a CloudFormation of its own, but it deletes the resources an update removes
*before* it adds and modifies the others (moto 5.2.5 `cloudformation/parsing.py`,
`ResourceMap.update`), the opposite of what CloudFormation documents; this stand-in
plays CloudFormation's order, which is what decides whether an experiment ends cleanly
(docs/platform-facts.md, "CloudFormation and the InferenceExperiment"):

- An update compares each resource's properties (tokens resolved) with the last ones it
  was given. Changed: when a create-only property changed (the type's
  `createOnlyProperties`, read from cfn-lint's resource schemas) it is *replaced*,
  otherwise updated. In dependency order (Ref, Fn::GetAtt, DependsOn: "Resource B is
  updated before resource A"), the new resources are created, the changed ones updated,
  the replacements created; then, in the cleanup pass, the resources the template no
  longer has and the replaced ones are deleted, dependents first ("AWS CloudFormation
  creates the replacement resource first, changes references from other dependent
  resources to point to the replacement resource, and then deletes the old resource
  during the cleanup phase").
- Each resource type the stage's stack holds is played by its handler's calls:
  the InferenceExperiment by the port of AWS's published handler
  (`cfn_inference_experiment.py`); the model custom resource by the project's own
  handler (the synthesized asset, as Lambda runs it); endpoint configs, endpoints,
  IAM roles and Application Auto Scaling targets and policies by the calls their
  handlers' documented behaviour implies (create, update, wait for InService, delete).
  The types whose effect no test here reads (keys, log groups, alarms, dashboards,
  policies, the provider's functions) are `INERT`: recorded, never called. Any other
  type fails the play, so a new resource cannot pass unexamined.

A delete that fails in the cleanup pass does not fail the update: CloudFormation "will
give up and leave the physical resource running but orphaned from CloudFormation
management" (recorded in `orphans`). Not modelled: rollback (a failure in the update
pass raises `StackFailedError` and leaves what was done, which the tests read), parallelism
(one valid serial order), the retries before giving up, stack policies, drift.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from types import ModuleType
from typing import Any, Protocol

import cfn_inference_experiment as experiment_handler
from cfn_inference_experiment import NotFoundError, Poll

INERT = frozenset(
    {
        "AWS::CDK::Metadata",
        "AWS::CloudWatch::Alarm",
        "AWS::CloudWatch::Dashboard",
        "AWS::IAM::Policy",
        "AWS::KMS::Key",
        "AWS::Lambda::Function",
        "AWS::Logs::LogGroup",
        "AWS::Logs::MetricFilter",
    }
)
PSEUDO = ("AWS::Partition", "AWS::Region", "AWS::AccountId", "AWS::URLSuffix", "AWS::StackName")


class StackFailedError(Exception):
    """A resource failed: the stack operation stops there (no rollback is modelled)."""

    def __init__(self, logical_id: str, action: str, error: Exception) -> None:
        super().__init__(f"{logical_id} {action} failed: {error}")
        self.logical_id, self.action, self.error = logical_id, action, error


@dataclass
class Deployed:
    """What CloudFormation keeps of one resource."""

    type: str
    physical_id: str
    properties: dict[str, Any]
    attributes: dict[str, str] = field(default_factory=dict)


class Player(Protocol):
    def create(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]: ...

    def update(self, res: Deployed, props: dict[str, Any]) -> tuple[str, dict[str, str]]: ...

    def delete(self, res: Deployed) -> None: ...


def create_only(type_name: str) -> frozenset[str]:
    """Top-level create-only properties of a type, from cfn-lint's resource schemas
    (a custom resource has none: its handler decides)."""
    if type_name.startswith("Custom::"):
        return frozenset()
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", type_name).schema
    return frozenset(p.split("/")[2] for p in schema.get("createOnlyProperties", []))


def references(value: Any) -> Iterator[str]:
    """The logical ids (and pseudo parameters) a property value refers to."""
    if isinstance(value, Mapping):
        if set(value) == {"Ref"}:
            yield str(value["Ref"])
        elif set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            yield str(target[0] if isinstance(target, list) else target.split(".")[0])
        else:
            for v in value.values():
                yield from references(v)
    elif isinstance(value, list):
        for v in value:
            yield from references(v)


def dependencies(template: Mapping[str, Any]) -> dict[str, set[str]]:
    """Logical id -> the resources it depends on (references and DependsOn)."""
    resources = template["Resources"]
    graph: dict[str, set[str]] = {}
    for lid, res in resources.items():
        depends = res.get("DependsOn", [])
        named = set([depends] if isinstance(depends, str) else depends)
        named |= {r for r in references(res.get("Properties", {})) if r in resources}
        graph[lid] = named
    return graph


@dataclass
class Event:
    """One thing the stand-in did: `action` is create, update, replace or delete."""

    action: str
    logical_id: str
    type: str


@dataclass
class HarnessStack:
    """One stack, played against the emulator's account (`players` by resource type)."""

    name: str
    players: dict[str, Player]
    account: str = "123456789012"
    region: str = "us-east-1"
    template: dict[str, Any] = field(default_factory=lambda: {"Resources": {}})
    resources: dict[str, Deployed] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    orphans: list[tuple[str, Deployed, str]] = field(default_factory=list)
    """(logical id, resource, error) of every delete the cleanup pass gave up on."""

    # --- resolution ---------------------------------------------------------------------
    def resolve(self, value: Any) -> Any:
        """Ref, Fn::GetAtt and Fn::Join with what is deployed now."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, Mapping):
            return value
        if set(value) == {"Ref"}:
            return self._ref(str(value["Ref"]))
        if set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            lid, attr = target if isinstance(target, list) else target.split(".", 1)
            return self.resources[lid].attributes.get(attr, f"{lid}.{attr}")
        if set(value) == {"Fn::Join"}:
            sep, parts = value["Fn::Join"]
            return str(sep).join(str(self.resolve(p)) for p in parts)
        return {k: self.resolve(v) for k, v in value.items()}

    def _ref(self, name: str) -> str:
        pseudo = {
            "AWS::Partition": "aws",
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.name,
        }
        return pseudo[name] if name in pseudo else self.resources[name].physical_id

    # --- stack operations ---------------------------------------------------------------
    def deploy(self, template: Mapping[str, Any]) -> None:
        """A stack create or update: the update pass, then the cleanup pass."""
        new = copy.deepcopy(dict(template))
        for lid, res in new["Resources"].items():
            if res["Type"] not in INERT and res["Type"] not in self.players:
                raise StackFailedError(lid, "plan", ValueError(f"no player for {res['Type']}"))
        order = list(TopologicalSorter(dependencies(new)).static_order())
        replaced: list[tuple[str, Deployed]] = []
        for lid in order:
            old = self.resources.get(lid)
            self._apply(lid, new["Resources"][lid], old, replaced)
        removed = [lid for lid in self.template["Resources"] if lid not in new["Resources"]]
        self._cleanup(removed, replaced)
        self.template = new

    def delete_stack(self) -> None:
        """Every resource deleted, dependents first."""
        self._cleanup(list(self.resources), [])
        self.template = {"Resources": {}}

    def _apply(
        self,
        lid: str,
        res: Mapping[str, Any],
        old: Deployed | None,
        replaced: list[tuple[str, Deployed]],
    ) -> None:
        rtype = res["Type"]
        props = self.resolve(res.get("Properties", {})) if rtype not in INERT else {}
        if old is not None and old.type == rtype and old.properties == props:
            return  # unchanged (a DependsOn change alone updates nothing)
        fixed = create_only(rtype) if rtype not in INERT else frozenset()
        replace = old is not None and (
            old.type != rtype or any(old.properties.get(k) != props.get(k) for k in fixed)
        )
        if old is None or replace:
            action = "replace" if replace else "create"
            physical, attrs = self._run(lid, action, lambda: self._create(lid, rtype, props))
            if replace and old is not None:
                replaced.append((lid, old))
        else:
            action = "update"
            physical, attrs = self._run(lid, action, lambda: self._update(lid, old, props))
        self.resources[lid] = Deployed(rtype, physical, props, attrs)
        self.events.append(Event(action, lid, rtype))

    def _create(self, lid: str, rtype: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        if rtype in INERT:
            return f"{self.name}-{lid}", {}
        return self.players[rtype].create(lid, props)

    def _update(self, lid: str, old: Deployed, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        if old.type in INERT:
            return old.physical_id, old.attributes
        return self.players[old.type].update(old, props)

    def _cleanup(self, removed: list[str], replaced: list[tuple[str, Deployed]]) -> None:
        """Removed and replaced resources deleted, dependents before what they use (the
        graph of the template they were deployed with)."""
        graph = dependencies(self.template)
        order = list(TopologicalSorter(graph).static_order())[::-1]
        doomed = {lid: self.resources[lid] for lid in removed}
        old_of = dict(replaced)
        for lid in order:
            res = doomed.get(lid) or old_of.get(lid)
            if res is None:
                continue
            if lid in doomed:
                del self.resources[lid]
            try:
                self._delete(res)
            except Exception as e:  # given up on: the update still succeeds
                self.orphans.append((lid, res, f"{type(e).__name__}: {e}"))
                continue
            self.events.append(Event("delete", lid, res.type))

    def _delete(self, res: Deployed) -> None:
        if res.type in INERT:
            return
        # CloudFormation takes a NotFound on delete as success (the DeleteHandler's comment)
        with contextlib.suppress(NotFoundError):
            self.players[res.type].delete(res)

    def _run(self, lid: str, action: str, call: Callable[[], Any]) -> Any:
        """A handler's failure (or a ClientError of a direct call) fails the resource."""
        try:
            return call()
        except Exception as e:
            raise StackFailedError(lid, action, e) from e

    # --- reading -------------------------------------------------------------------------
    def of_type(self, rtype: str) -> dict[str, Deployed]:
        return {lid: r for lid, r in self.resources.items() if r.type == rtype}

    def actions(self, rtype: str) -> list[str]:
        """The actions taken on resources of one type, in order."""
        return [e.action for e in self.events if e.type == rtype]


# --- players ---------------------------------------------------------------------------
@dataclass
class ExperimentPlayer:
    """AWS::SageMaker::InferenceExperiment: the published handler's port."""

    sm: Any
    poll: Poll = field(default_factory=Poll)

    def create(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        name = experiment_handler.create(self.sm, props, self.poll)
        arn = self.sm.describe_inference_experiment(Name=name)["Arn"]
        return name, {"Arn": arn, "Name": name}

    def update(self, res: Deployed, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        experiment_handler.update(self.sm, props, self.poll)
        return res.physical_id, res.attributes

    def delete(self, res: Deployed) -> None:
        experiment_handler.delete(self.sm, res.properties, self.poll)


@dataclass
class EndpointConfigPlayer:
    """AWS::SageMaker::EndpointConfig: every property but Tags is create-only."""

    sm: Any

    def create(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        self.sm.create_endpoint_config(**props)
        name = str(props["EndpointConfigName"])
        return name, {"EndpointConfigName": name}

    def update(self, res: Deployed, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        return res.physical_id, res.attributes  # tags only: not played

    def delete(self, res: Deployed) -> None:
        self.sm.delete_endpoint_config(EndpointConfigName=res.physical_id)


_UPDATE_FIELDS = (
    "EndpointConfigName",
    "DeploymentConfig",
    "RetainAllVariantProperties",
    "ExcludeRetainedVariantProperties",
    "RetainDeploymentConfig",
)


@dataclass
class EndpointPlayer:
    """AWS::SageMaker::Endpoint: CreateEndpoint / UpdateEndpoint, then InService on the
    asked config (an update SageMaker rolled back fails the resource); DeleteEndpoint."""

    sm: Any
    poll: Poll = field(default_factory=Poll)

    def create(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        name = str(props["EndpointName"])
        self.sm.create_endpoint(
            EndpointName=name, EndpointConfigName=props["EndpointConfigName"], Tags=props["Tags"]
        )
        self._wait(name, str(props["EndpointConfigName"]))
        return name, {"EndpointName": name}

    def update(self, res: Deployed, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        asked = {k: props[k] for k in _UPDATE_FIELDS if k in props}
        if asked == {k: res.properties[k] for k in _UPDATE_FIELDS if k in res.properties}:
            return res.physical_id, res.attributes  # tags only: not played
        self.sm.update_endpoint(EndpointName=res.physical_id, **asked)
        self._wait(res.physical_id, str(props["EndpointConfigName"]))
        return res.physical_id, res.attributes

    def _wait(self, name: str, config: str) -> None:
        for _ in range(self.poll.budget):
            described = self.sm.describe_endpoint(EndpointName=name)
            if described["EndpointStatus"] == "Failed":
                raise RuntimeError(f"{name} Failed: {described.get('FailureReason')}")
            if described["EndpointStatus"] == "InService":
                if described["EndpointConfigName"] != config:
                    raise RuntimeError(f"{name} was rolled back: {described.get('FailureReason')}")
                return
            self.poll.between()
        raise RuntimeError(f"{name} not InService after the budget")

    def delete(self, res: Deployed) -> None:
        self.sm.delete_endpoint(EndpointName=res.physical_id)


@dataclass
class RolePlayer:
    """AWS::IAM::Role: CreateRole under a generated name (the emulator checks that an
    experiment's role exists); policies are inert."""

    iam: Any
    stack: str

    def create(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        name = f"{self.stack}-{logical_id}"[:64]
        role = self.iam.create_role(
            RoleName=name, AssumeRolePolicyDocument=json.dumps(props["AssumeRolePolicyDocument"])
        )["Role"]
        return name, {"Arn": role["Arn"], "RoleId": role["RoleId"]}

    def update(self, res: Deployed, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        return res.physical_id, res.attributes

    def delete(self, res: Deployed) -> None:
        self.iam.delete_role(RoleName=res.physical_id)


_TARGET_FIELDS = ("ServiceNamespace", "ResourceId", "ScalableDimension")


@dataclass
class ScalableTargetPlayer:
    """AWS::ApplicationAutoScaling::ScalableTarget: RegisterScalableTarget on create and
    update (SuspendedState passed only when the template gives it), Deregister."""

    aas: Any

    def create(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        self._register(props)
        return "|".join(
            str(props[k]) for k in ("ResourceId", "ScalableDimension", "ServiceNamespace")
        ), {}

    def update(self, res: Deployed, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        self._register(props)
        return res.physical_id, res.attributes

    def _register(self, props: dict[str, Any]) -> None:
        keys = (*_TARGET_FIELDS, "MinCapacity", "MaxCapacity", "SuspendedState")
        self.aas.register_scalable_target(**{k: props[k] for k in keys if k in props})

    def delete(self, res: Deployed) -> None:
        self.aas.deregister_scalable_target(**{k: res.properties[k] for k in _TARGET_FIELDS})


@dataclass
class ScalingPolicyPlayer:
    """AWS::ApplicationAutoScaling::ScalingPolicy on the target its ScalingTargetId names."""

    aas: Any

    def _target(self, props: Mapping[str, Any]) -> dict[str, str]:
        resource, dimension, namespace = str(props["ScalingTargetId"]).split("|")
        return {
            "ResourceId": resource,
            "ScalableDimension": dimension,
            "ServiceNamespace": namespace,
        }

    def create(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        answer = self.aas.put_scaling_policy(
            PolicyName=props["PolicyName"],
            PolicyType=props["PolicyType"],
            TargetTrackingScalingPolicyConfiguration=props[
                "TargetTrackingScalingPolicyConfiguration"
            ],
            **self._target(props),
        )
        return str(answer["PolicyARN"]), {}

    def update(self, res: Deployed, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        return self.create("", props)

    def delete(self, res: Deployed) -> None:
        self.aas.delete_scaling_policy(
            PolicyName=res.properties["PolicyName"], **self._target(res.properties)
        )


@dataclass
class ModelPlayer:
    """The model custom resource (Custom::PeagleModel): the project's handler from the
    synthesized asset, given CloudFormation's events, with the emulator as AWS."""

    handler: ModuleType
    environ: Callable[[], Any]
    """A context manager that points the handler's botocore at the emulator."""

    def _event(self, kind: str, props: dict[str, Any], res: Deployed | None) -> dict[str, Any]:
        event: dict[str, Any] = {
            "RequestType": kind,
            "ResourceType": "Custom::PeagleModel",
            "ResourceProperties": props,
        }
        if res is not None:
            event["PhysicalResourceId"] = res.physical_id
            event["OldResourceProperties"] = res.properties
        return event

    def _call(self, event: dict[str, Any]) -> dict[str, Any]:
        with self.environ():
            answer: dict[str, Any] = self.handler.on_event(event, None)
            return answer

    def create(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        answer = self._call(self._event("Create", props, None))
        return str(answer["PhysicalResourceId"]), dict(answer.get("Data") or {})

    def update(self, res: Deployed, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        answer = self._call(self._event("Update", props, res))
        return str(answer["PhysicalResourceId"]), dict(answer.get("Data") or {})

    def delete(self, res: Deployed) -> None:
        self._call(self._event("Delete", res.properties, res))


def stage_players(
    aws: Any, stack: str, handler: ModuleType, poll: Poll | None = None
) -> dict[str, Player]:
    """The players of a stage's stack, with clients on the emulator `aws` (LocalAWS)."""
    poll = poll or Poll()
    sm = aws.client("sagemaker")
    aas = aws.client("application-autoscaling")
    return {
        "AWS::SageMaker::InferenceExperiment": ExperimentPlayer(sm, poll),
        "AWS::SageMaker::EndpointConfig": EndpointConfigPlayer(sm),
        "AWS::SageMaker::Endpoint": EndpointPlayer(sm, poll),
        "AWS::IAM::Role": RolePlayer(aws.client("iam"), stack),
        "AWS::ApplicationAutoScaling::ScalableTarget": ScalableTargetPlayer(aas),
        "AWS::ApplicationAutoScaling::ScalingPolicy": ScalingPolicyPlayer(aas),
        "Custom::PeagleModel": ModelPlayer(handler, aws.patched_environ),
    }
