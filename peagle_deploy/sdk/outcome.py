"""What one `deploy_peagle()` did: the result the SDK returns and the CLI prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Action = Literal["create", "update", "noop", "resume", "recreate"]


@dataclass
class DeployOutcome:
    """What a deploy did (or, with dry_run, would do)."""

    action: Action
    endpoint_name: str
    endpoint_config_name: str
    model_name: str
    content_hash: str
    region: str
    stage: str
    status: str
    """Endpoint status at the end ("InService", or "Creating"/"Updating" with wait=False)."""
    dry_run: bool = False
    previous_config: str | None = None
    created: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    manifest_parameter: str | None = None
    elapsed_s: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "dry_run": self.dry_run,
            "status": self.status,
            "endpoint_name": self.endpoint_name,
            "endpoint_config_name": self.endpoint_config_name,
            "model_name": self.model_name,
            "previous_config": self.previous_config,
            "content_hash": self.content_hash,
            "region": self.region,
            "stage": self.stage,
            "created": self.created,
            "removed": self.removed,
            "manifest_parameter": self.manifest_parameter,
            "elapsed_s": round(self.elapsed_s, 3),
            "warnings": self.warnings,
        }
