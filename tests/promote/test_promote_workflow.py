"""The example GitHub Actions workflow: order of jobs, OIDC only, approval before prod."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "deploy.yml"


def _load() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    # PyYAML reads the bare key `on` as the boolean True (YAML 1.1).
    data["on"] = data.pop(True, data.get("on"))
    return data


def _steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if str(s.get("uses", "")).startswith(action + "@")]


def test_jobs_run_in_order_and_prod_waits_for_an_environment() -> None:
    jobs = _load()["jobs"]
    chain = ["test", "synth", "deploy-dev", "promote-staging", "promote-prod"]
    assert list(jobs) == chain
    for before, job in itertools.pairwise(chain):
        assert jobs[job]["needs"] == before
    assert jobs["promote-prod"]["environment"] == "prod"
    assert jobs["promote-staging"]["environment"] == "staging"
    assert jobs["deploy-dev"]["environment"] == "dev"
    # Pull requests never reach AWS.
    assert "pull_request" in jobs["deploy-dev"]["if"]


def test_aws_access_is_oidc_only() -> None:
    data = _load()
    text = WORKFLOW.read_text()
    assert data["permissions"] == {"contents": "read"}  # least privilege by default
    for forbidden in ("aws-access-key-id", "aws-secret-access-key", "AWS_SECRET_ACCESS_KEY"):
        assert forbidden not in text
    assert "secrets." not in text
    for name, job in data["jobs"].items():
        creds = _steps_using(job, "aws-actions/configure-aws-credentials")
        if name in ("test", "synth"):
            assert not creds and "permissions" not in job
            continue
        assert job["permissions"]["id-token"] == "write"
        assert len(creds) == 1 and creds[0]["with"]["role-to-assume"].startswith("${{ vars.")


def _peagle_commands() -> list[list[str]]:
    commands: list[list[str]] = []
    for job in _load()["jobs"].values():
        for step in job["steps"]:
            run = " ".join(str(step.get("run", "")).split())
            for part in re.split(r"\s*(?:&&|;)\s*", run):
                if part.startswith("peagle "):
                    argv = shlex.split(part.split(">")[0])
                    commands.append(argv[1:])
    return commands


def test_promote_steps_use_real_options() -> None:
    """Every `peagle promote` line in the workflow parses with the real CLI."""
    import typer.main

    from peagle_deploy.cli.app import app

    root = typer.main.get_command(app)
    assert hasattr(root, "commands")
    promotes = [c for c in _peagle_commands() if c[0] == "promote"]
    assert len(promotes) == 4  # dry run + real, for staging and prod
    for argv in promotes:
        command = root.commands["promote"]
        ctx = command.make_context("promote", argv[1:], resilient_parsing=False)
        assert ctx.params["source_stage"] in ("dev", "staging")
        assert ctx.params["gates"] == "$PEAGLE_GATES"


def test_deploy_step_uses_real_options_and_an_existing_spec() -> None:
    from typer.main import get_command

    from peagle_deploy.cli.app import app

    root: Any = get_command(app)
    deploys = [c for c in _peagle_commands() if c[0] == "deploy"]
    assert len(deploys) == 1
    ctx = root.commands["deploy"].make_context("deploy", deploys[0][1:])
    assert ctx.params["stage"] == "dev"
    spec_file = _load()["env"]["PEAGLE_SPEC"]
    assert (REPO / spec_file).is_file()
