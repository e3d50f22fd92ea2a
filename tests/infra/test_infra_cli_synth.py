"""`make test` synthesizes every stage through the pinned CDK CLI (package.json).

Runs `npx cdk synth` the way a user does after docs/cdk.md's set-up (its synth example
is this command, and so is docs/first-deploy.md's step 0), with cdk-nag switched on
(`-c peagle:nag=true`), into a temporary output directory. Skipped only where Node.js is
missing on a developer machine; in CI (CI=true) a missing npx fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cdk_helpers import ROOT

pytestmark = pytest.mark.xdist_group(name="cdk")

PINNED_CLI = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]


def _npx() -> str:
    npx = shutil.which("npx")
    cli = ROOT / "node_modules" / "aws-cdk" / "package.json"
    if npx is None or not cli.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail("npx or node_modules/aws-cdk missing in CI: run `make setup`")
        pytest.skip("Node.js/npx or the pinned CDK CLI is not installed here (`make setup`)")
    return npx


def test_pinned_cli_version() -> None:
    installed = json.loads((ROOT / "node_modules" / "aws-cdk" / "package.json").read_text())
    assert PINNED_CLI.startswith("2.1148.")
    if installed["version"] != PINNED_CLI:
        pytest.fail(
            f"node_modules has aws-cdk {installed['version']}, package.json pins {PINNED_CLI}"
        )


def test_npx_cdk_synth_all_stages(tmp_path: Path) -> None:
    npx = _npx()
    out = tmp_path / "cdk.out"
    venv_bin = ROOT / ".venv" / "bin"
    env = {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    for var in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "CDK_DEFAULT_ACCOUNT"):
        env.pop(var, None)
    documented = "npx cdk synth -c peagle:nag=true --quiet"
    assert documented in (ROOT / "docs" / "cdk.md").read_text(encoding="utf-8")
    # docs/first-deploy.md's step 0 is this synth, CI roles included (OWNER/REPO there)
    first_deploy = "npx cdk synth -c peagle:nag=true -c peagle:github_repo=OWNER/REPO --quiet"
    assert first_deploy in (ROOT / "docs" / "first-deploy.md").read_text(encoding="utf-8")
    command = [npx, "--no-install", "cdk", "synth", "--quiet", "--no-notices"]
    command += ["-o", str(out), "-c", "peagle:nag=true", "-c", "peagle:github_repo=acme/llm"]
    result = subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # Python constructs have no useful JavaScript stack trace to point warnings at ...
    assert "program.js" not in result.stderr
    # ... and a clean cdk-nag run says that it ran.
    assert "cdk-nag AwsSolutions: checked 4 stack(s), no unacknowledged findings" in (result.stderr)
    manifest = json.loads((out / "manifest.json").read_text())
    stacks = sorted(
        name
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    )
    assert stacks == [
        "PeagleCiRoles",
        "PeagleEndpoint-dev",
        "PeagleEndpoint-prod",
        "PeagleEndpoint-staging",
    ]
    ci = json.loads((out / "PeagleCiRoles.template.json").read_text())
    assert sorted(k for k in ci["Outputs"] if k.startswith("DeployRoleArn")) == [
        "DeployRoleArnDev",
        "DeployRoleArnProd",
        "DeployRoleArnStaging",
    ]
    for stack in stacks[1:]:
        template = json.loads((out / f"{stack}.template.json").read_text())
        types = {r["Type"] for r in template["Resources"].values()}
        assert {"Custom::PeagleModel", "AWS::SageMaker::Endpoint"} <= types
    report = json.loads((out / "validation-report.json").read_text())
    assert [p for p in report["pluginReports"] if p.get("violations")] == []


def test_make_synth_runs_cdk_nag() -> None:
    """The workflow's "cdk synth (all stages, cdk-nag)" step is `make synth`: it must turn
    the checks on, not only synthesize."""
    make = shutil.which("make")
    assert make, "make is needed"
    dry = subprocess.run(
        [make, "-n", "-W", "pyproject.toml", "synth"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    synth = [line for line in dry.splitlines() if "cdk synth" in line]
    assert len(synth) == 1 and "-c peagle:nag=true" in synth[0], dry
