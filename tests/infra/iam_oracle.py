"""Ask an IAM evaluator we did not write (@cloud-copilot/iam-simulate, via iam_oracle.cjs)
whether synthesized policies allow a request.

The templates' policies are read as CloudFormation would deploy them: `Ref` to the pseudo
parameters and `Fn::Join` are resolved for one account, region and partition, and
`Fn::GetAtt [<role>, Arn]` / `Ref <provider>` for the stack's own resources.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ORACLE = Path(__file__).with_name("iam_oracle.cjs")
ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"
PARTITION = "aws"


@dataclass(frozen=True)
class Ask:
    """One request: may `principal` call `action` on `resource`, with `context`?"""

    action: str
    resource: str
    context: Mapping[str, str | list[str]] = field(default_factory=dict, hash=False)
    account: str = ACCOUNT
    """The resource's account (the principal's unless a test says otherwise)."""


def require_node() -> str:
    node = shutil.which("node")
    assert node, "node is needed for the outside IAM evaluator (make setup installs npm deps)"
    assert (ROOT / "node_modules" / "@cloud-copilot" / "iam-simulate").is_dir(), (
        "node_modules/@cloud-copilot/iam-simulate is missing: run `make setup` (npm ci)"
    )
    return node


def run(simulations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """iam-simulate's decision for each simulation (Allowed, ImplicitlyDenied,
    ExplicitlyDenied, or Error with its validation errors)."""
    done = subprocess.run(
        [require_node(), str(ORACLE)],
        input=json.dumps(list(simulations)),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def resolve(
    value: Any,
    *,
    region: str,
    account: str = ACCOUNT,
    partition: str = PARTITION,
    refs: Mapping[str, str] | None = None,
) -> Any:
    """A template value with the intrinsics a policy uses resolved to text."""
    refs = {
        "AWS::Partition": partition,
        "AWS::AccountId": account,
        "AWS::Region": region,
        "AWS::URLSuffix": "amazonaws.com",
        **(refs or {}),
    }

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Ref"}:
            return refs[node["Ref"]]
        if set(node) == {"Fn::GetAtt"}:
            logical_id, attr = node["Fn::GetAtt"]
            return refs[f"{logical_id}.{attr}"]
        if set(node) == {"Fn::Join"}:
            sep, parts = node["Fn::Join"]
            return str(sep).join(str(walk(p)) for p in parts)
        return {k: walk(v) for k, v in node.items()}

    return walk(value)


@dataclass(frozen=True)
class TemplateRoles:
    """The roles of one synthesized template: trust and identity policies, resolved."""

    template: Mapping[str, Any]
    region: str
    account: str = ACCOUNT
    stack: str | None = None
    """The stack's name, when roles of several stacks are compared: a role without a
    RoleName (a key) gets a unique physical name (id) from CloudFormation, so two stacks'
    roles of the same logical id are two roles; here `<stack>-<logical id>` (None: the
    logical id)."""

    def _refs(self) -> dict[str, str]:
        refs: dict[str, str] = {}
        for lid, res in self.template["Resources"].items():
            if res["Type"] == "AWS::IAM::Role":
                refs[f"{lid}.Arn"] = self.role_arn(lid)
            elif res["Type"] == "AWS::KMS::Key":
                refs[f"{lid}.Arn"] = self.key_arn(lid)
            elif res["Type"] == "AWS::Logs::LogGroup":
                name = res["Properties"].get("LogGroupName", lid)
                refs[f"{lid}.Arn"] = (
                    f"arn:{PARTITION}:logs:{self.region}:{self.account}:log-group:{name}:*"
                )
            elif res["Type"] == "AWS::Lambda::Function":
                refs[f"{lid}.Arn"] = (
                    f"arn:{PARTITION}:lambda:{self.region}:{self.account}:function:{lid}"
                )
            elif res["Type"] == "AWS::IAM::OIDCProvider":
                host = res["Properties"]["Url"].removeprefix("https://")
                refs[lid] = f"arn:{PARTITION}:iam::{self.account}:oidc-provider/{host}"
        return refs

    def _resolve(self, value: Any) -> Any:
        return resolve(value, region=self.region, account=self.account, refs=self._refs())

    def role_arn(self, logical_id: str) -> str:
        name = logical_id if self.stack is None else f"{self.stack}-{logical_id}"
        return f"arn:{PARTITION}:iam::{self.account}:role/{name}"

    def key_arn(self, logical_id: str) -> str:
        name = logical_id if self.stack is None else f"{self.stack}-{logical_id}"
        return f"arn:{PARTITION}:kms:{self.region}:{self.account}:key/{name}"

    def logical_id(self, rtype: str, path_part: str) -> str:
        """The logical id of the only resource of `rtype` whose id contains `path_part`."""
        found = [
            lid
            for lid, res in self.template["Resources"].items()
            if res["Type"] == rtype and path_part in lid
        ]
        assert len(found) == 1, (rtype, path_part, found)
        return found[0]

    def role_id(self, path_part: str) -> str:
        """The logical id of the only role whose id contains `path_part`."""
        found = [
            lid
            for lid, res in self.template["Resources"].items()
            if res["Type"] == "AWS::IAM::Role" and path_part in lid
        ]
        assert len(found) == 1, (path_part, found)
        return found[0]

    def trust(self, role_id: str) -> dict[str, Any]:
        doc: dict[str, Any] = self._resolve(
            self.template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]
        )
        return doc

    def identity_policies(self, role_id: str) -> list[dict[str, Any]]:
        """Inline policies of the role (its own and AWS::IAM::Policy resources naming it)
        and the stack's customer managed policies attached to it (AWS::IAM::ManagedPolicy
        naming it; AWS managed policies stay refused)."""
        role = self.template["Resources"][role_id]["Properties"]
        assert not role.get("ManagedPolicyArns"), f"{role_id} has managed policies"
        out = [
            {"name": p["PolicyName"], "policy": self._resolve(p["PolicyDocument"])}
            for p in role.get("Policies", [])
        ]
        for lid, res in self.template["Resources"].items():
            if res["Type"] not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                continue
            if {"Ref": role_id} in res["Properties"].get("Roles", []):
                out.append(
                    {"name": lid, "policy": self._resolve(res["Properties"]["PolicyDocument"])}
                )
        return out

    def key_policy(self, logical_id: str) -> dict[str, Any]:
        policy: dict[str, Any] = self._resolve(
            self.template["Resources"][logical_id]["Properties"]["KeyPolicy"]
        )
        return policy

    def simulation(
        self, role_id: str, ask: Ask, resource_policy: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The role calling `ask` with its identity policies (and the resource's own
        policy, which KMS keys always have)."""
        simulation: dict[str, Any] = {
            "request": {
                "principal": self.role_arn(role_id),
                "action": ask.action,
                "resource": {"resource": ask.resource, "accountId": ask.account},
                "contextVariables": dict(ask.context),
            },
            "identityPolicies": self.identity_policies(role_id),
        }
        if resource_policy is not None:
            simulation["resourcePolicy"] = dict(resource_policy)
        return simulation

    def decide(
        self,
        role_id: str,
        asks: Sequence[Ask],
        resource_policy: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """The oracle's decision for each ask; a validation error fails the test."""
        results = run([self.simulation(role_id, a, resource_policy) for a in asks])
        for ask, result in zip(asks, results, strict=True):
            assert result["decision"] != "Error", (ask, result["errors"])
            assert not result["ignored"], (ask, "context keys the action lacks", result["ignored"])
        return [r["decision"] for r in results]
