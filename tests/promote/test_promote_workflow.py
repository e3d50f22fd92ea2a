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
    assert list(jobs) == [*chain, "experiment"]
    for before, job in itertools.pairwise(chain):
        assert jobs[job]["needs"] == before
    # A manual experiment command runs alone: the chain's first job is off for it (and
    # so every job that needs it), and the experiment job needs nothing.
    assert "inputs.experiment == 'none'" in jobs["test"]["if"]
    assert "needs" not in jobs["experiment"]
    assert "inputs.experiment != 'none'" in jobs["experiment"]["if"]
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


# --- supply chain and trust (issue 19) ------------------------------------------------

_SHA_PIN = re.compile(r"^(?P<action>[\w.-]+/[\w.-]+)@(?P<sha>[0-9a-f]{40})$")
_RAW = WORKFLOW.read_text()


def _uses_lines() -> list[tuple[str, str]]:
    """(`uses:` value, the tag in its trailing comment) for every step."""
    out = []
    for line in _RAW.splitlines():
        match = re.match(r"^\s*-?\s*uses:\s*(\S+)\s*(?:#\s*(\S+))?\s*$", line)
        if match:
            out.append((match[1], match[2] or ""))
    return out


def _pinned_in_docs() -> dict[str, tuple[str, str]]:
    """action -> (tag, sha) from the table in docs/ci.md that records where each SHA was
    read."""
    table = {}
    for line in (REPO / "docs" / "ci.md").read_text().splitlines():
        cells = [c.strip(" `") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"[0-9a-f]{40}", cells[2]):
            table[cells[0]] = (cells[1], cells[2])
    return table


def test_every_action_is_pinned_by_commit_sha_as_recorded() -> None:
    uses = _uses_lines()
    assert len(uses) >= 15
    recorded = _pinned_in_docs()
    for value, tag in uses:
        match = _SHA_PIN.match(value)
        assert match, f"{value}: not pinned to a commit SHA"
        assert re.fullmatch(r"v\d+\.\d+\.\d+", tag), f"{value}: the comment names no tag"
        assert recorded.get(match["action"]) == (tag, match["sha"]), (
            f"{value} ({tag}) is not what docs/ci.md records for {match['action']}"
        )


def test_no_expression_is_expanded_inside_a_script() -> None:
    """`${{ vars.X }}` inside `run:` is pasted into the shell script before it runs: a
    variable holding `"; curl ... #` would run. Scripts read variables from env."""
    for name, job in _load()["jobs"].items():
        for step in job["steps"]:
            assert "${{" not in str(step.get("run", "")), (name, step.get("name"))


def test_jobs_with_aws_access_run_on_main_only_in_their_environment() -> None:
    from infra.deploy_role import MAX_SESSION_HOURS

    for name, job in _load()["jobs"].items():
        if job.get("permissions", {}).get("id-token") != "write":
            assert "environment" not in job, name
            continue
        stages = ("dev", "staging", "prod")
        if job["environment"] == "${{ inputs.stage }}":  # a manual run's choice of stage
            stage_input = _load()["on"]["workflow_dispatch"]["inputs"]["stage"]
            assert stage_input["type"] == "choice" and stage_input["options"] == list(stages)
        else:
            assert job["environment"] in stages, name
        condition = " ".join(str(job["if"]).split())
        assert "github.ref == 'refs/heads/main'" in condition, name
        assert (
            "github.event_name != 'pull_request'" in condition
            or "github.event_name == 'workflow_dispatch'" in condition
        ), name
        (creds,) = _steps_using(job, "aws-actions/configure-aws-credentials")
        seconds = int(creds["with"]["role-duration-seconds"])
        assert job["timeout-minutes"] * 60 <= seconds <= MAX_SESSION_HOURS * 3600, name


def test_checkout_never_keeps_the_token() -> None:
    for name, job in _load()["jobs"].items():
        (checkout,) = _steps_using(job, "actions/checkout")
        assert checkout["with"]["persist-credentials"] is False, name


def test_deploying_jobs_install_exactly_the_lock() -> None:
    for name, job in _load()["jobs"].items():
        if "environment" not in job:
            continue
        scripts = "\n".join(str(s.get("run", "")) for s in job["steps"])
        installs = [line.strip() for line in scripts.splitlines() if "pip install" in line]
        assert installs == [
            "pip install --require-hashes --no-deps -r requirements/deploy.lock",
            "pip install --no-deps --no-build-isolation .",
        ], name


def _lock() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of requirements/deploy.lock."""
    text = (REPO / "requirements" / "deploy.lock").read_text().replace("\\\n", " ")
    entries = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.match(r"^([A-Za-z0-9._-]+)==(\S+)((?:\s+--hash=sha256:[0-9a-f]{64})+)$", line)
        assert match, f"not an exact, hashed pin: {line[:80]}"
        hashes = re.findall(r"sha256:([0-9a-f]{64})", match[3])
        entries[match[1].lower().replace("_", "-")] = (match[2], hashes)
    return entries


def test_the_lock_pins_and_hashes_what_pyproject_asks_for() -> None:
    """requirements/deploy.lock satisfies pyproject.toml's dependencies and build
    requirements (scripts/lock-deploy.sh regenerates it); each entry is one version
    with its hashes, so pip resolves no range and installs nothing unverified."""
    import tomllib

    from packaging.requirements import Requirement

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    lock = _lock()
    wanted = [
        *pyproject["project"]["dependencies"],
        *pyproject["project"]["optional-dependencies"]["bench"],  # the gates' benchmark
        *pyproject["build-system"]["requires"],
    ]
    for text in wanted:
        req = Requirement(text)
        name = req.name.lower().replace("_", "-")
        assert name in lock, (
            f"{name} is not in requirements/deploy.lock: run scripts/lock-deploy.sh"
        )
        version, hashes = lock[name]
        assert req.specifier.contains(version, prereleases=True), (
            f"{name}=={version} does not satisfy {text}: run scripts/lock-deploy.sh"
        )
        assert hashes
