"""Every `cdk deploy` the project ships (CI workflow, docs) comes after `peagle doctor
--stage` for the same stage, the pre-flight `peagle deploy` runs by itself."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CDK_DEPLOY = re.compile(r"cdk deploy\s+(?:\S+\s+)*?PeagleEndpoint-(?P<stage>[\w${}.\-]+)")
DOCTOR = re.compile(r"peagle doctor\s+(?:\S+\s+)*?--stage\s+(?P<stage>[\w${}.\-]+)")


def _deploys_without_doctor(commands: list[str]) -> list[str]:
    """`cdk deploy` commands not preceded by a doctor of their stage."""
    doctored: set[str] = set()
    missing = []
    for text in commands:
        for line in text.splitlines():
            doctor = DOCTOR.search(line)
            if doctor:
                doctored.add(doctor["stage"])
            deploy = CDK_DEPLOY.search(line)
            if deploy and deploy["stage"] not in doctored:
                missing.append(line.strip())
    return missing


def test_workflow_jobs_run_doctor_before_cdk_deploy() -> None:
    for path in (ROOT / ".github" / "workflows").glob("*.yml"):
        workflow = yaml.safe_load(path.read_text())
        for name, job in workflow["jobs"].items():
            runs = [str(step.get("run", "")) for step in job.get("steps", [])]
            assert _deploys_without_doctor(runs) == [], (path.name, name)


def test_docs_run_doctor_before_cdk_deploy() -> None:
    for path in (ROOT / "docs").glob("*.md"):
        # every fence pairs with its own closer (a ```json block must not shift the pairs)
        fenced = re.findall(r"```([\w-]*)\n(.*?)```", path.read_text(), re.DOTALL)
        blocks = [body for lang, body in fenced if lang in ("", "bash", "sh", "yaml", "console")]
        assert _deploys_without_doctor(blocks) == [], path.name


def test_the_check_notices_a_missing_doctor() -> None:
    assert _deploys_without_doctor(["npx cdk deploy PeagleEndpoint-prod"]) == [
        "npx cdk deploy PeagleEndpoint-prod"
    ]
    assert (
        _deploys_without_doctor(["peagle doctor --stage prod\nnpx cdk deploy PeagleEndpoint-prod"])
        == []
    )
    assert _deploys_without_doctor(
        ["peagle doctor --stage dev\nnpx cdk deploy PeagleEndpoint-prod"]
    )
