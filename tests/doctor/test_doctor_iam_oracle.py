"""doctor's IAM decisions against an evaluator it did not write.

For every case of `iam_corpus`, doctor's verdict is built the way `peagle doctor` builds
it: the role's side from the emulator's iam:SimulatePrincipalPolicy answer (parsed by
`doctor.simulation.role_side`), the resource's side from `doctor.policy_eval`, the two
combined by `doctor.decision.decide`. The same case goes to @cloud-copilot/iam-simulate
(npm, pinned in package.json, test-only) run by Node.js. They must never contradict each
other; a warning (doctor's `unknown`) is only allowed where the values doctor cannot know
change the oracle's answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from iam_corpus import ACCOUNT, CASES, ROLE, SESSION, Case
from peagle_local.emulator.account_ext import simulation_result
from peagle_local.emulator.iam_policy import NamedPolicy

from peagle_deploy.doctor.decision import ResourceSide, decide, no_policy
from peagle_deploy.doctor.policy_eval import Principal, Request, evaluate
from peagle_deploy.doctor.simulation import role_side

ROOT = Path(__file__).resolve().parents[2]
ORACLE = Path(__file__).with_name("iam_oracle.cjs")
PACKAGE = ROOT / "node_modules" / "@cloud-copilot" / "iam-simulate" / "package.json"
PINNED = "0.1.173"
BASE_CONTEXT = {"aws:PrincipalArn": ROLE, "aws:PrincipalAccount": ACCOUNT}


def _node() -> str:
    node = shutil.which("node")
    if node is None or not PACKAGE.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail("node or node_modules/@cloud-copilot/iam-simulate missing: `make setup`")
        pytest.skip("Node.js or @cloud-copilot/iam-simulate is not installed here (`make setup`)")
    assert json.loads(PACKAGE.read_text())["version"] == PINNED
    return node


def _keys(document: Any) -> Iterator[str]:
    """Every condition key a policy document mentions."""
    if isinstance(document, dict):
        for name, value in document.items():
            if name == "Condition" and isinstance(value, dict):
                for pairs in value.values():
                    yield from pairs
            else:
                yield from _keys(value)
    elif isinstance(document, list):
        for item in document:
            yield from _keys(item)


def doctor_verdict(case: Case) -> tuple[str, tuple[str, ...]]:
    context = {**BASE_CONTEXT, **case.context}
    simulated = simulation_result(
        [NamedPolicy(f"p{i}", "role", p) for i, p in enumerate(case.identity)],
        [NamedPolicy("boundary", "user-managed", case.boundary)] if case.boundary else None,
        case.action,
        case.resource,
        {k: [v] for k, v in context.items()},
    )
    role = role_side(simulated, case.resource)
    mentioned = {k.lower() for k in _keys([case.identity, case.resource_policy, case.boundary])}
    known = {k.lower() for k in context} | {k.lower() for k in case.unknown}
    request = Request(
        action=case.action,
        resource=case.resource,
        principal=Principal(ACCOUNT, ROLE),
        context={k: [v] for k, v in context.items()},
        absent=frozenset(mentioned - known),
    )
    where = f"the {case.kind} resource policy"
    resource: ResourceSide = (
        ResourceSide(evaluate(case.resource_policy, request, resource_policy=True), where)
        if case.resource_policy is not None
        else no_policy(where)
    )
    verdict = decide(role, resource, kind=case.kind, same_account=case.resource_account == ACCOUNT)  # type: ignore[arg-type]
    return verdict.verdict, verdict.unknown_keys


def _simulation(case: Case, extra: dict[str, str]) -> dict[str, Any]:
    simulation: dict[str, Any] = {
        "request": {
            "principal": SESSION,
            "action": case.action,
            "resource": {"resource": case.resource, "accountId": case.resource_account},
            "contextVariables": {**BASE_CONTEXT, **case.context, **extra},
        },
        "identityPolicies": [{"name": f"p{i}", "policy": p} for i, p in enumerate(case.identity)],
        "serviceControlPolicies": [],
        "resourceControlPolicies": [],
    }
    if case.resource_policy is not None:
        simulation["resourcePolicy"] = case.resource_policy
    if case.boundary is not None:
        simulation["permissionBoundaryPolicies"] = [{"name": "boundary", "policy": case.boundary}]
    return simulation


def oracle_answers(cases: list[Case]) -> dict[str, str]:
    jobs = []
    for case in cases:
        if case.variants:
            jobs += [
                {"id": f"{case.id}#{i}", "simulation": _simulation(case, v)}
                for i, v in enumerate(case.variants)
            ]
        else:
            jobs.append({"id": case.id, "simulation": _simulation(case, {})})
    done = subprocess.run(
        [_node(), str(ORACLE)],
        input=json.dumps(jobs).encode(),
        capture_output=True,
        check=False,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    answers: dict[str, str] = json.loads(done.stdout)
    errors = {k: v for k, v in answers.items() if v.startswith("error")}
    assert not errors, errors
    return answers


def compare(cases: list[Case]) -> dict[str, Any]:
    """Agreement of doctor and the oracle over `cases`."""
    answers = oracle_answers(cases)
    agree, justified, contradictions = [], [], []
    undecided: dict[str, str] = {}
    for case in cases:
        verdict, unknown = doctor_verdict(case)
        if case.undecided:
            if verdict == "unknown":
                undecided[case.id] = answers[case.id]
            else:
                contradictions.append((case.id, verdict, unknown, "should warn"))
            continue
        if case.variants:
            outcomes = {answers[f"{case.id}#{i}"] == "Allowed" for i in range(len(case.variants))}
            if verdict == "unknown" and len(outcomes) == 2 and set(unknown) <= set(case.unknown):
                justified.append(case.id)
            else:
                contradictions.append((case.id, verdict, unknown, outcomes))
            continue
        allowed = answers[case.id] == "Allowed"
        if (verdict, allowed) in (("allow", True), ("deny", False)):
            agree.append(case.id)
        else:
            contradictions.append((case.id, verdict, unknown, answers[case.id]))
    return {
        "cases": len(cases),
        "agree": len(agree),
        "justified_warnings": len(justified),
        "undecided": undecided,
        "contradictions": contradictions,
    }


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


def test_doctor_agrees_with_the_outside_evaluator() -> None:
    figures = compare(CASES)
    assert figures["contradictions"] == [], figures["contradictions"]
    warned = figures["justified_warnings"] + len(figures["undecided"])
    assert figures["agree"] + warned == figures["cases"]
    print(  # the figures quoted in docs/doctor.md
        f"\n{figures['cases']} cases: {figures['agree']} decided, all agreeing with "
        f"@cloud-copilot/iam-simulate {PINNED}; {figures['justified_warnings']} warnings on "
        "unknown context, each where the unknown value changes the oracle's answer; "
        f"{len(figures['undecided'])} warnings where AWS's documentation is silent "
        f"(oracle: {sorted(figures['undecided'].values())})"
    )


@pytest.mark.parametrize("case", [c for c in CASES if c.variants], ids=lambda c: c.id)
def test_unknown_context_is_a_warning_naming_the_keys(case: Case) -> None:
    verdict, keys = doctor_verdict(case)
    assert verdict == "unknown" and set(keys) == set(case.unknown)
