"""Container output as SageMaker keeps it: CloudWatch Logs `/aws/sagemaker/Endpoints/<name>`,
one stream per variant and instance (`<variant>/<instance id>`), in moto's logs backend."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable

LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints/"
DEFAULT_VARIANT = "AllTraffic"


def log_group_name(endpoint_name: str) -> str:
    """The CloudWatch Logs group SageMaker writes an endpoint's container output to."""
    return LOG_GROUP_PREFIX + endpoint_name


def write_endpoint_logs(
    account_id: str,
    region: str,
    endpoint_name: str,
    lines: Iterable[str],
    *,
    stream: str | None = None,
    timestamp_ms: int | None = None,
) -> None:
    """Append lines to `/aws/sagemaker/Endpoints/<name>`, stream `<variant>/i-<id>`
    (default `AllTraffic/i-<id>`)."""
    from moto.logs.models import logs_backends

    lines = list(lines)
    if not lines:
        return
    backend = logs_backends[account_id][region]
    group = log_group_name(endpoint_name)
    if group not in backend.groups:
        backend.create_log_group(group, {})
    if stream is None:
        instance = hashlib.sha256(endpoint_name.encode()).hexdigest()[:17]
        stream = f"{DEFAULT_VARIANT}/i-{instance}"
    backend.ensure_log_stream(group, stream)
    now = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
    backend.put_log_events(group, stream, [{"timestamp": now, "message": m} for m in lines])
