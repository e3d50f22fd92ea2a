"""docs/experiments.md's table of what the caller of `peagle experiment` needs is what the
Service Authorization Reference derives from the experiment's calls (issue 34 item 5).

The calls are the ones `peagle doctor` asks about before an experiment starts
(doctor/coming.py `experiment_calls`: start, status, end, a winner's deploy), which the
call ledger checks against every call the experiments it records make
(tests/infra/test_infra_call_ledger.py, `test_the_doctor_asks_about_every_call_the_run_
makes`); the product's map turns each into its IAM requests (every required resource,
the condition keys the call decides). The table lists, per action, the resources it is
asked on and those keys, for a shadow and a split experiment on an autoscaled stage
whose model reads a secret. A change to either makes this test fail with the new table.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from doctor_testkit import REGION

from peagle_deploy.catalog.iam_calls import Where, iam_requests
from peagle_deploy.catalog.iam_reference import reference
from peagle_deploy.doctor.coming import experiment_calls

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "experiments.md"
BEGIN = "<!-- derived: tests/doctor/test_doctor_experiment_permissions.py -->"
END = "<!-- end of derived -->"
ACCOUNT = "123456789012"
EXECUTION_ROLE = f"arn:aws:iam::{ACCOUNT}:role/peagle-execution"
EXPERIMENT_ROLE = f"arn:aws:iam::{ACCOUNT}:role/peagle-experiment"
SECRET = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:hf-token-AbCdEf"


def _experiments() -> list[Any]:
    """A shadow and a split experiment on an autoscaled stage whose model reads a secret."""
    from peagle_deploy.experiment.plan import experiment_plan
    from peagle_deploy.spec import spec_from_dict

    out = []
    for mode, share in (("shadow", {}), ("split", {"weight_percent": 50})):
        spec = spec_from_dict(
            {
                "model": "gpt-oss-20b",
                "region": REGION,
                "stage": "prod",
                "instance_type": "ml.g7e.2xlarge",
                "execution_role_arn": EXECUTION_ROLE,
                "secrets": {"HF_TOKEN": SECRET},
                "scaling": {"min_instances": 1, "max_instances": 4},
                "experiment": {
                    "mode": mode,
                    "candidate": {"num_speculative_tokens": 5},
                    **share,
                },
            }
        )
        out.append(experiment_plan(spec, experiment_role_arn=EXPERIMENT_ROLE))
    return out


def _resource(arn: str, xp: Any) -> str:
    """A request's resource as the table names it: the resource part of its ARN, the
    stage's names spelled as placeholders."""
    if arn == "*":
        return "`*`"
    named = {
        EXECUTION_ROLE: "role/<execution role>",
        EXPERIMENT_ROLE: "role/<experiment role>",
        SECRET: "secret:<the spec's secrets>",
    }
    endpoint = xp.incumbent.endpoint_name
    text = named.get(arn, arn.split(":", 5)[5])
    text = re.sub(rf"{re.escape(endpoint)}-([mcx])[0-9a-f]{{8}}", r"<endpoint>-\1<digest>", text)
    text = text.replace(endpoint, "<endpoint>").replace("/prod/", "/<stage>/")
    return f"`{text.replace('peagle-generated-id', '<target id>')}`"


def _key(key: str) -> str:
    """A condition key as the reference spells it (a tag key as its template)."""
    for name in ("aws:RequestTag/", "aws:ResourceTag/"):
        if key.startswith(name):
            return f"`{name}${{TagKey}}`"
    return f"`{key}`"


def derived_table() -> str:
    """The caller's permissions of an experiment, one row per action."""
    rows: dict[str, tuple[set[str], set[str]]] = {}
    for xp in _experiments():
        calls = experiment_calls(xp.incumbent, xp.requests, xp.candidate, ACCOUNT)
        for service, operation, params in calls:
            for r in iam_requests(service, operation, params, Where(REGION, ACCOUNT)):
                resources, keys = rows.setdefault(r.action, (set(), set()))
                resources.add(_resource(r.resource, xp))
                keys.update(_key(k) for k in r.context)
    ref = reference()
    lines = [
        "| action | access | on | condition keys the request carries |",
        "|---|---|---|---|",
    ]
    for action in sorted(rows, key=str.lower):
        resources, keys = rows[action]
        found = ref.action(action)
        assert found is not None, action
        lines.append(
            f"| `{action}` | {found.access_level} | {', '.join(sorted(resources))} | "
            f"{', '.join(sorted(keys)) or '-'} |"
        )
    return "\n".join(lines)


def documented_table() -> str:
    text = DOC.read_text()
    assert BEGIN in text and END in text, f"docs/experiments.md lacks {BEGIN} ... {END}"
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def test_the_documented_permissions_are_what_the_reference_derives() -> None:
    derived = derived_table()
    assert documented_table() == derived, (
        "docs/experiments.md's table of the caller's permissions differs from what the "
        f"reference derives; replace it with:\n{derived}"
    )


def test_the_table_names_the_tag_on_create_keys_and_the_roles_passed() -> None:
    table = derived_table()
    create = next(r for r in table.splitlines() if "`sagemaker:CreateInferenceExperiment`" in r)
    assert "`aws:RequestTag/${TagKey}`" in create and "`aws:TagKeys`" in create
    passed = next(r for r in table.splitlines() if "`iam:PassRole`" in r)
    assert "role/<experiment role>" in passed and "role/<execution role>" in passed
    assert "`iam:PassedToService`" in passed
