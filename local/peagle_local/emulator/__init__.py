"""Stand-ins for AWS that the tests, `peagle bench` and the demo run against.

Nothing here talks to AWS. `MotoExtensions` closes moto's SageMaker gaps (GPU instance
types, UpdateEndpoint with rollback, scripted Creating/Failed lifecycles, OpenAI chat on
InvokeEndpoint, InvokeEndpointWithResponseStream in the real event-stream framing,
training jobs that train a small table drafter on their data);
`AccountExtensions` adds the Service Quotas and iam:SimulatePrincipalPolicy answers
`peagle doctor` reads, and `world.stage_world` an account a plan would deploy into;
`LocalAWS` runs them behind a moto server on 127.0.0.1 that answers only its own Host,
no web page, requests signed with its own key (`env()`), and the services the project
calls (`guard`).

    from peagle_local.emulator import LocalAWS
    with LocalAWS() as aws:
        aws.script_endpoint("my-endpoint", creating_s=2.0)
        aws.set_stream(ttft_s=0.2, token_delay_s=0.01, tokens_per_chunk=3)
        sm = aws.client("sagemaker")        # or os.environ.update(aws.env())
"""

from __future__ import annotations

from peagle_local.emulator.account_ext import AccountExtensions
from peagle_local.emulator.chat import (
    DEFAULT_MODEL_ID,
    ChatRequest,
    ChatRequestError,
    StreamSettings,
    chat_completion,
    generate,
    sse_events,
)
from peagle_local.emulator.eventstream import (
    encode_message,
    model_stream_error,
    payload_part,
    split_awkwardly,
)
from peagle_local.emulator.local import LocalAWS, reset_moto_state
from peagle_local.emulator.moto_ext import (
    AcceptanceMetrics,
    EndpointScript,
    MotoExtensions,
    Transition,
    log_group_name,
    write_endpoint_logs,
)

__all__ = [
    "DEFAULT_MODEL_ID",
    "AcceptanceMetrics",
    "AccountExtensions",
    "ChatRequest",
    "ChatRequestError",
    "EndpointScript",
    "LocalAWS",
    "MotoExtensions",
    "StreamSettings",
    "Transition",
    "chat_completion",
    "encode_message",
    "generate",
    "log_group_name",
    "model_stream_error",
    "payload_part",
    "reset_moto_state",
    "split_awkwardly",
    "sse_events",
    "write_endpoint_logs",
]
