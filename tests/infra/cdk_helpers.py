"""Shared helpers for the CDK tests: synthesize an app once, with cdk-nag, and read it."""

from __future__ import annotations

import fcntl
import json
import os
import pickle
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The jsii runtime prints a large banner on Node 20; it is noise in test output.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.stack import PeagleStack
from infra.stages import StageConfig
from peagle_deploy.plan import Plan
from peagle_deploy.stage_training import stage_training

ROOT = Path(__file__).resolve().parents[2]
CDK_JSON = ROOT / "cdk.json"
ROLE_PLACEHOLDER = "arn:aws:iam::123456789012:role/peagle-test-execution-role"
EDGE_ACCOUNT = "123456789012"
EDGE_OVERRIDES: dict[str, Any] = {
    "model": "custom",
    "region": "eu-west-1",
    "instance_type": "ml.g7e.4xlarge",
    "initial_instance_count": 2,
    "custom": {
        "image_uri": f"{EDGE_ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/team/peagle-vllm:1.0",
        "model_data_uri": "s3://acme-models/qwen3/model.tar.gz",
        "drafter_uri": "s3://acme-drafters/qwen3-p-eagle/",
        "drafter_kind": "p-eagle",
        "weights_gb": 60,
    },
    "speculative": {"num_speculative_tokens": 7},
    "vpc": {
        "subnet_ids": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"],
        "security_group_ids": ["sg-0123456789abcdef0"],
    },
    "routing_strategy": "PREFIX_AWARE",
    "inference_ami_version": "al2023-ami-sagemaker-inference-gpu-4-1",
    "rollout": {"strategy": "linear", "alarms": ["ops-pager"]},
    "model_data_kms_key_arns": [
        f"arn:aws:kms:eu-west-1:{EDGE_ACCOUNT}:key/0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e"
    ],
    "scaling": {"min_instances": 2, "max_instances": 3, "target_invocations_per_instance": 8},
}


def edge_stage() -> StageConfig:
    """A stage that exercises what the example stages do not: custom model in a
    `.tar.gz`, own ECR repository, VPC, PREFIX_AWARE routing, linear rollout with an
    extra rollback alarm, a pinned account and another region."""
    return StageConfig(
        name="edge",
        spec_file=None,
        overrides=EDGE_OVERRIDES,
        account=EDGE_ACCOUNT,
        log_retention_days=7,
        alarms={"errors_5xx_per_minute": 2},
        # its own training image in another account's registry; the spec's VPC
        training=stage_training(
            {
                "bucket": "acme-edge-training",
                "image_repository": EDGE_OVERRIDES["custom"]["image_uri"].replace(
                    "peagle-vllm", "peagle-train"
                ),
                "instance_types": ["ml.p5.48xlarge"],
            },
            "edge",
            "edge.training",
        ),
    )


def cdk_context() -> dict[str, Any]:
    """The context block of the repository's cdk.json."""
    context: dict[str, Any] = json.loads(CDK_JSON.read_text())["context"]
    return context


@dataclass(frozen=True)
class StackInfo:
    """What the tests need of a built PeagleStack (picklable across xdist workers)."""

    region: str
    account: str | None
    """None when the stack is account-agnostic."""
    termination_protection: bool
    plan: Plan


@dataclass
class Synthesized:
    """One synthesized app: its stacks, their templates and the cdk-nag findings."""

    outdir: Path
    stacks: dict[str, StackInfo]
    templates: dict[str, dict[str, Any]]
    violations: list[dict[str, Any]]
    error: str | None
    acknowledged: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Stack id -> (construct path, acknowledged rule id) pairs recorded in the tree."""

    def resources(self, stack_id: str, rtype: str) -> dict[str, dict[str, Any]]:
        """Logical id -> resource of one type in one stack's template."""
        return {
            lid: res
            for lid, res in self.templates[stack_id]["Resources"].items()
            if res["Type"] == rtype
        }

    def one(self, stack_id: str, rtype: str) -> dict[str, Any]:
        """The only resource of `rtype` in the stack (fails if there are 0 or several)."""
        found = self.resources(stack_id, rtype)
        assert len(found) == 1, f"{stack_id}: expected one {rtype}, found {sorted(found)}"
        return next(iter(found.values()))


def _strip_prefix(rule_id: str) -> str:
    for prefix in ("Annotation::", "AwsSolutions::"):
        if rule_id.startswith(prefix):
            return rule_id[len(prefix) :]
    return rule_id


def _acknowledged(stack: cdk.Stack) -> list[tuple[str, str]]:
    key = cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    out: list[tuple[str, str]] = []
    for construct in stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type != key:
                continue
            # {"<Prefix>::<rule id>": reason}; ids without a known prefix get "Annotation::"
            for rule_id, reason in dict(entry.data).items():
                assert str(reason).strip(), f"{construct.node.path}: {rule_id} has no reason"
                out.append((construct.node.path, _strip_prefix(str(rule_id))))
    return out


def synthesize(
    stages: list[StageConfig], outdir: Path, *, context: Mapping[str, Any] | None = None
) -> Synthesized:
    """Build one PeagleStack per stage in a fresh App, run cdk-nag, synthesize."""
    app = cdk.App(outdir=str(outdir), context=dict(context or {}))
    built = {s.stack_id: PeagleStack(app, s.stack_id, stage=s) for s in stages}
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    error = None
    try:
        app.synth()
    except RuntimeError as exc:  # cdk-nag findings stop synthesis (ValidationFailed)
        error = str(exc)
    report = json.loads((outdir / "validation-report.json").read_text())
    violations = [v for plugin in report["pluginReports"] for v in plugin["violations"]]
    templates = {sid: json.loads((outdir / f"{sid}.template.json").read_text()) for sid in built}
    stacks = {
        sid: StackInfo(
            region=st.region,
            account=None if cdk.Token.is_unresolved(st.account) else st.account,
            termination_protection=st.termination_protection,
            plan=st.plan,
        )
        for sid, st in built.items()
    }
    return Synthesized(
        outdir=outdir,
        stacks=stacks,
        templates=templates,
        violations=violations,
        error=error,
        acknowledged={sid: _acknowledged(st) for sid, st in built.items()},
    )


def synthesize_once(
    name: str, tmp_path_factory: Any, build: Callable[[Path], Synthesized]
) -> Synthesized:
    """Synthesize once per test run, also under pytest-xdist.

    Session fixtures run once per xdist worker, and `--dist loadgroup` does not keep
    groups together with pytest 9 (xdist 3.8 sets `item._nodeid`, which pytest 9 no
    longer reads), so the first worker synthesizes under a file lock and pickles the
    result into the run's shared temporary directory; the others load it.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return build(tmp_path_factory.mktemp(name))
    shared = Path(tmp_path_factory.getbasetemp()).parent / f"cdk-{name}"
    shared.mkdir(exist_ok=True)
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            done = shared / "synth.pickle"
            if done.exists():
                loaded: Synthesized = pickle.loads(done.read_bytes())
                return loaded
            synth = build(shared / "out")
            done.write_bytes(pickle.dumps(synth))
            return synth
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def decode_json_property(value: Any, substitutions: Mapping[str, str]) -> dict[str, Any]:
    """The JSON object inside a custom resource property, with tokens substituted.

    `substitutions` maps a logical id to the text its `Fn::GetAtt [id, Arn]` stands for.
    """
    if isinstance(value, str):
        text = value
    else:
        sep, parts = value["Fn::Join"]
        pieces = []
        for part in parts:
            if isinstance(part, str):
                pieces.append(part)
            else:
                logical_id, attr = part["Fn::GetAtt"]
                assert attr == "Arn", part
                pieces.append(substitutions[logical_id])
        text = sep.join(pieces)
    decoded: dict[str, Any] = json.loads(text)
    return decoded


@contextmanager
def environ(**values: str | None) -> Iterator[None]:
    """Set (or unset, with None) environment variables for the duration of a block."""
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def experiment_stage() -> StageConfig:
    """dev with an experiment (stages/dev-experiment.yaml), as its comment says to
    synthesize it, with a candidate that also brings its own drafter (so the execution
    role must read it too)."""
    return StageConfig(
        name="dev",
        spec_file=ROOT / "stages" / "dev-experiment.yaml",
        overrides={
            "experiment.candidate.drafter_uri": "s3://peagle-candidates/gpt-oss-20b-p-eagle-v2/",
            "experiment.candidate.drafter_kind": "p-eagle",
        },
        log_retention_days=14,
    )
