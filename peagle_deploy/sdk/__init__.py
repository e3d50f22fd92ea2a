"""The Python SDK: deploy, watch, invoke and remove P-EAGLE endpoints.

from peagle_deploy import deploy_peagle
endpoint = deploy_peagle("qwen3-coder-30b-a3b-instruct", instance_type="ml.g7e.2xlarge",
                         num_speculative_tokens=3, role_arn=ROLE, stage="dev")
print(endpoint.chat([{"role": "user", "content": "hi"}], max_tokens=64).text)
for delta in endpoint.stream([{"role": "user", "content": "hi"}]):
    print(delta, end="")
"""

from __future__ import annotations

from peagle_deploy.records import (
    DeploymentManifest,
    ManifestError,
    manifest_parameter_name,
    read_manifest,
    write_manifest,
)
from peagle_deploy.sdk.deploy import check_deployable_role, deploy_peagle, plan_for
from peagle_deploy.sdk.endpoint import (
    ChatResult,
    ChatStream,
    DeleteResult,
    EndpointNotFoundError,
    InvokeError,
    PeagleEndpoint,
)
from peagle_deploy.sdk.listing import EndpointSummary, list_endpoints
from peagle_deploy.sdk.outcome import DeployOutcome
from peagle_deploy.sdk.waiter import (
    EndpointGoneError,
    Interrupted,
    WaitInterrupted,
    WaitTimeoutError,
)

__all__ = [
    "ChatResult",
    "ChatStream",
    "DeleteResult",
    "DeployOutcome",
    "DeploymentManifest",
    "EndpointGoneError",
    "EndpointNotFoundError",
    "EndpointSummary",
    "Interrupted",
    "InvokeError",
    "ManifestError",
    "PeagleEndpoint",
    "WaitInterrupted",
    "WaitTimeoutError",
    "check_deployable_role",
    "deploy_peagle",
    "list_endpoints",
    "manifest_parameter_name",
    "plan_for",
    "read_manifest",
    "write_manifest",
]
