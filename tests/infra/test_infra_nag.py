"""cdk-nag AwsSolutions on every stack: zero unacknowledged findings, and every
acknowledgement is narrow (one finding, one construct), reasoned and needed."""

from __future__ import annotations

import pytest
from cdk_helpers import Synthesized

pytestmark = pytest.mark.xdist_group(name="cdk")

# Every acknowledgement the stacks may carry: rule, where (construct path suffix), and
# the finding it accepts. A new wildcard or a new acknowledged rule fails this list.
ALLOWED_FINDINGS = (
    ("AwsSolutions-IAM5", "/Endpoint/ExecutionRole/Policy", "Resource::*"),
    ("AwsSolutions-IAM5", "/Endpoint/ExecutionRole/Policy", "Resource::arn:<AWS::Partition>:s3:::"),
    (
        "AwsSolutions-IAM5",
        "/Endpoint/ExecutionRole/Policy",
        "Resource::arn:<AWS::Partition>:logs:",
    ),
    (
        "AwsSolutions-IAM5",
        "/Endpoint/ExecutionRole/Policy",
        "Resource::arn:<AWS::Partition>:ec2:",
    ),
    # SageMaker names the config a shadow experiment makes (infra/experiment.py); the
    # experiment role reads the models' data prefixes and gets the ECR token (`*`), as
    # the execution role does.
    (
        "AwsSolutions-IAM5",
        "/Endpoint/ShadowExperiment/Policy",
        "Resource::arn:<AWS::Partition>:sagemaker:",
    ),
    (
        "AwsSolutions-IAM5",
        "/Endpoint/ShadowExperiment/Policy",
        "Resource::arn:<AWS::Partition>:s3:::",
    ),
    ("AwsSolutions-IAM5", "/Endpoint/ShadowExperiment/Policy", "Resource::*"),
    # The training role (infra/training.py): its stage's training prefixes, its jobs' log
    # streams, the ECR token and training metrics (`*`), ENIs in a VPC.
    ("AwsSolutions-IAM5", "/Training/Policy", "Resource::*"),
    ("AwsSolutions-IAM5", "/Training/Policy", "Resource::arn:<AWS::Partition>:s3:::"),
    ("AwsSolutions-IAM5", "/Training/Policy", "Resource::arn:<AWS::Partition>:logs:"),
    ("AwsSolutions-IAM5", "/Training/Policy", "Resource::arn:<AWS::Partition>:ec2:"),
    # The Provider framework may invoke the model handler and its versions (`<arn>:*`).
    (
        "AwsSolutions-IAM5",
        "/Endpoint/Model/FrameworkRole/DefaultPolicy",
        "Resource::<EndpointModelOnEvent",
    ),
)


def _violations(synth: Synthesized) -> list[str]:
    return [
        f"{v['ruleName']} at {[c['constructPath'] for c in v['violatingConstructs']]}"
        for v in synth.violations
    ]


def test_stages_have_no_unacknowledged_findings(stage_synth: Synthesized) -> None:
    assert _violations(stage_synth) == []
    assert stage_synth.error is None


def test_edge_stack_has_no_unacknowledged_findings(edge_synth: Synthesized) -> None:
    assert _violations(edge_synth) == []
    assert edge_synth.error is None


def test_acknowledgements_are_narrow_and_expected(all_synths: list[Synthesized]) -> None:
    seen = 0
    for synth in all_synths:
        for stack, acks in synth.acknowledged.items():
            for path, rule_id in acks:
                rule, _, rest = rule_id.partition("[")
                assert rest.endswith("]"), f"{path}: {rule_id} acknowledges a whole rule"
                finding = rest[:-1]
                assert any(
                    rule == r and path.endswith(where) and finding.startswith(prefix)
                    for r, where, prefix in ALLOWED_FINDINGS
                ), f"{stack}: unexpected acknowledgement {rule_id} on {path}"
                # A wildcard on S3/logs/model ARNs names the bucket/group/prefix it is on;
                # one on a function's versions names the function (`<Fn.Arn>:*`).
                if finding != "Resource::*":
                    assert finding.endswith("*"), finding
                    assert len(finding) > 60 or finding.endswith(".Arn>:*"), finding
                seen += 1
    assert seen > 0


def test_every_acknowledgement_is_needed(
    edge_synth: Synthesized, edge_synth_unacknowledged: Synthesized
) -> None:
    """Without acknowledgements, cdk-nag reports exactly the acknowledged findings."""
    acknowledged = {
        (path, rule_id) for acks in edge_synth.acknowledged.values() for path, rule_id in acks
    }
    reported = set()
    for v in edge_synth_unacknowledged.violations:
        for c in v["violatingConstructs"]:
            # Findings are reported on the L1 child (`.../Policy/Resource`).
            reported.add((c["constructPath"].removesuffix("/Resource"), v["ruleName"]))
    assert edge_synth_unacknowledged.error is not None  # the checks do fail without them
    normalized = {(path.removesuffix("/Resource"), rule_id) for path, rule_id in acknowledged}
    assert reported == normalized
